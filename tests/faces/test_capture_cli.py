"""`memfile capture TRANSCRIPT` (memfile/cli/capture.py) against an OpenAI-compatible server started by the
test on 127.0.0.1 (tests/helpers/chat.py): no model is reachable from the test machine, so the server
stands in for one, answering what a model would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import commit_count, fails, in_vault, ok, write
from helpers.chat import ChatServer, completion, openai_error

from memfile import Vault

CHAT = [
    {"role": "user", "content": "I moved to Porto. My sister Ana is a nurse."},
    {"role": "assistant", "content": "Noted."},
]
ANSWER = {
    "memories": [
        {"category": "identity", "key": "home_city", "content": "Lives in Porto.", "turns": [0]},
        {"category": "fact", "key": "sister_ana", "content": "Sister Ana is a nurse.", "turns": [0]},
    ]
}


@pytest.fixture
def chat() -> ChatServer:
    with ChatServer() as server:
        server.answer = completion(json.dumps(ANSWER))
        yield server


def configured(root: Path, url: str) -> None:
    text = (root / "memfile.toml").read_text(encoding="utf-8")
    write(root / "memfile.toml", text + f'\n[capture]\nendpoint = "{url}"\nmodel = "stand-in"\n')


def transcript(root: Path) -> Path:
    return write(root / "chat.jsonl", "".join(json.dumps(m) + "\n" for m in CHAT))


def test_capture_asks_the_endpoint_and_proposals_wait_for_review(vault: Vault, chat: ChatServer) -> None:
    configured(vault.root, chat.url)
    before = commit_count(vault.root)
    result = ok(in_vault(vault.root, "capture", str(transcript(vault.root))))
    assert "add    identity/home_city: nothing in the mind says it" in result.stdout
    assert (
        "captured chat: 2 add, 0 update, 0 skip" in result.stderr
        and "2 wait for review: memfile review" in result.stderr
    )
    assert commit_count(vault.root) == before + 1
    [request] = chat.requests
    sent = request.json
    assert sent["model"] == "stand-in" and sent["messages"][1]["content"].startswith("[0] user: I moved to Porto.")
    assert {m.ref: dict(m.extra)["captured_from"] for m in Vault.open(vault.root).proposals()} == {
        "identity/home_city": "chat",
        "fact/sister_ana": "chat",
    }


def test_json_dry_run_and_stdin(vault: Vault, chat: ChatServer) -> None:
    configured(vault.root, chat.url)
    before = commit_count(vault.root)
    lines = "".join(json.dumps(m) + "\n" for m in CHAT)
    data = json.loads(ok(in_vault(vault.root, "capture", "-", "--dry-run", "--json", input=lines)).stdout)
    assert data["dry_run"] and [d["action"] for d in data["decisions"]] == ["add", "add"]
    assert commit_count(vault.root) == before
    whole = write(vault.root / "chat.json", json.dumps({"messages": CHAT}))
    data = json.loads(
        ok(in_vault(vault.root, "capture", str(whole), "--no-review", "--session", "s9", "--json")).stdout
    )
    assert (
        data["session"] == "s9"
        and not data["proposed"]
        and Vault.open(vault.root).get("identity/home_city").status is None
    )


def test_without_an_extractor_it_says_how_to_configure_one_and_writes_nothing(vault: Vault) -> None:
    before = commit_count(vault.root)
    result = fails(in_vault(vault.root, "capture", str(transcript(vault.root))), 2)
    assert "[capture]" in result.stderr and "endpoint" in result.stderr and "Traceback" not in result.stderr
    assert commit_count(vault.root) == before


def test_an_endpoint_error_is_exit_9_and_writes_nothing(vault: Vault, chat: ChatServer) -> None:
    configured(vault.root, chat.url)
    chat.answer = openai_error(500, "the model fell over")
    before = commit_count(vault.root)
    result = fails(in_vault(vault.root, "capture", str(transcript(vault.root))), 9)
    assert "500" in result.stderr and "the model fell over" in result.stderr
    assert commit_count(vault.root) == before


def test_a_model_answer_that_is_not_the_format_is_exit_2_and_writes_nothing(vault: Vault, chat: ChatServer) -> None:
    configured(vault.root, chat.url)
    chat.answer = completion("Sure! Here are the memories: Porto.")
    before = commit_count(vault.root)
    result = fails(in_vault(vault.root, "capture", str(transcript(vault.root))), 2)
    assert "extractor answer" in result.stderr and commit_count(vault.root) == before


@pytest.mark.parametrize(
    ("content", "named"),
    [('{"role": "user", "content": "hi"}\nnot json\n', "transcript line 2"), ("\xff\xfe", "UTF-8")],
)
def test_a_transcript_that_is_not_chat_messages_is_named(
    vault: Vault, chat: ChatServer, content: str, named: str
) -> None:
    configured(vault.root, chat.url)
    path = vault.root / "bad.jsonl"
    path.write_bytes(content.encode("latin-1") if named == "UTF-8" else content.encode("utf-8"))
    assert named in fails(in_vault(vault.root, "capture", str(path)), 2).stderr
    assert "transcript" in fails(in_vault(vault.root, "capture", str(vault.root / "missing.jsonl")), 2).stderr
    assert chat.requests == []
