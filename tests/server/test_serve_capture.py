"""POST /memory/capture (a real `memfile serve`) and the MCP `capture` tool (over stdio), asking an
OpenAI-compatible server the test starts on 127.0.0.1 (tests/helpers/chat.py): no model is reachable from
the test machine, so it stands in for one. The model is asked off the worker thread: the server answers
other requests meanwhile."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import commit_count, write
from helpers.chat import ChatServer, completion, openai_error, silent
from helpers.mcp import Agent, serve
from helpers.serve import Server, Setup, make_setup, serving

from memfile import Vault

MESSAGES = [{"role": "user", "content": "My dog is called Rex."}, {"role": "assistant", "content": "Nice!"}]
ANSWER = json.dumps({"memories": [{"category": "fact", "key": "dog_rex", "content": "Has a dog named Rex."}]})


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, chat: ChatServer) -> Setup:
    setup = make_setup(tmp_path_factory.mktemp("serve-capture"))
    config = setup.root / "memfile.toml"
    write(
        config, config.read_text(encoding="utf-8") + f'\n[capture]\nendpoint = "{chat.url}"\nmodel = "m"\ntimeout = 3\n'
    )
    return setup


def test_a_mind_key_captures_and_the_memory_waits_for_review(
    server: Server, setup: Setup, agent: str, chat: ChatServer
) -> None:
    chat.answer = completion(ANSWER)
    before = commit_count(setup.root)
    answer = server.request("POST", "/memory/capture", agent, {"messages": MESSAGES, "session": "dog-chat"})
    assert answer.status == 200, answer
    report = answer.json()
    assert report["session"] == "dog-chat" and report["proposed"] and report["decisions"][0]["action"] == "add"
    assert commit_count(setup.root) == before + 1
    assert chat.requests[-1].json["messages"][1]["content"] == "[0] user: My dog is called Rex.\n\n[1] assistant: Nice!"
    assert server.request("GET", "/memory/search?q=Rex", agent).json() == []  # waits for a person
    dry = server.request("POST", "/memory/capture", agent, {"messages": MESSAGES, "dry_run": True}).json()
    assert dry["dry_run"] and dry["decisions"][0]["action"] == "skip"  # the proposal counts as held


def test_bad_requests_and_a_failing_model_write_nothing(
    server: Server, setup: Setup, agent: str, chat: ChatServer
) -> None:
    before = commit_count(setup.root)
    for body, status, named in (
        ({"messages": "hello"}, 400, "messages"),
        ({"messages": MESSAGES, "colour": 1}, 400, "colour"),
        ({}, 400, "messages"),
    ):
        answer = server.request("POST", "/memory/capture", agent, body)
        assert answer.status == status and named in answer.json()["message"], answer
    chat.answer = openai_error(500, "out of memory")
    failed = server.request("POST", "/memory/capture", agent, {"messages": MESSAGES})
    assert failed.status == 502 and "out of memory" in failed.json()["message"]
    chat.answer = completion("not json")
    assert server.request("POST", "/memory/capture", agent, {"messages": MESSAGES}).status == 400
    assert commit_count(setup.root) == before


def test_a_model_that_never_answers_is_bounded_and_the_server_answers_meanwhile(
    server: Server, agent: str, chat: ChatServer
) -> None:
    chat.answer = silent
    took: list[float] = []

    def capture() -> None:
        start = time.monotonic()
        took.append(server.request("POST", "/memory/capture", agent, {"messages": MESSAGES}).status)
        took.append(time.monotonic() - start)

    thread = threading.Thread(target=capture)
    thread.start()
    time.sleep(0.5)
    assert server.request("GET", "/memory/search?q=anything", agent).status == 200  # not stuck behind the model
    thread.join(30)
    assert took[0] == 502 and took[1] < 3 + 10  # [capture] timeout = 3 s, and a margin for a loaded machine


def test_without_a_model_configured_it_says_how(tmp_path: Path) -> None:
    setup = make_setup(tmp_path)
    with serving(setup) as server:
        answer = server.request("POST", "/memory/capture", setup.tokens["michael"], {"messages": MESSAGES})
    assert answer.status == 400 and "[capture]" in answer.json()["message"]


def test_the_mcp_capture_tool(tmp_path: Path, chat: ChatServer) -> None:
    vault = Vault.init(tmp_path / "v", "michael", "Michael")
    write(
        vault.root / "memfile.toml",
        (vault.root / "memfile.toml").read_text(encoding="utf-8")
        + f'\n[capture]\nendpoint = "{chat.url}"\nmodel = "m"\n',
    )
    chat.answer = completion(ANSWER)

    async def script(agent: Agent) -> tuple[dict, str]:
        report = await agent.ok("capture", messages=MESSAGES, session="mcp-chat")
        return report, await agent.error("capture", messages="not a list")

    report, error = serve(vault.root, script)
    assert report["decisions"][0]["action"] == "add" and report["proposed"]
    assert "messages" in error
    [proposal] = Vault.open(vault.root).proposals()
    assert dict(proposal.extra)["captured_from"] == "mcp-chat" and str(proposal.source) == "agent"
