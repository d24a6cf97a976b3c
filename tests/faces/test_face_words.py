"""Each face says what to do next in its own words (memfile.errors: `Face`, `HINTS`, `MemfileError.said`): the
command line its commands and --options, the HTTP API its endpoints and fields, the MCP tools their names or
what to ask the user, the memory tool its commands, the console its pages and buttons; a `Notice` (what a write
did) ends with its hint the same way. Through the faces themselves: the command line in CliRunner, a real
`memfile serve` process and client, a real MCP session over stdio, the memory tool's backend, the console's
application in Starlette's TestClient. The meta-test at the end sends the common errors and notices through the
HTTP API, MCP, the memory tool and the console and finds no command line and no --option in any answer."""

from __future__ import annotations

import json
import marshal
import re
import shutil
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, fails, git, in_vault, ok
from helpers.console import MIND, SAME, Console, act, csrf_of, memory_url, page
from helpers.serve import Server, Setup, make_setup

from memfile import Vault
from memfile.cli import main
from memfile.errors import HINTS, Face, MemfileError, NotFound, Notice, told
from memfile.memory_tool import MemoryToolBackend, MemoryToolError
from memfile.model import StoreResult
from memfile.store_queue import decode, encode

#: A token every rule of the scanner calls a GitHub token (made here, so no real token is in the repository).
TOKEN = "ghp_" + "Qw3Er5Ty7Ui9" * 3
#: What only the command line says: one of its commands, or one of its --options.
COMMAND_LINE = re.compile(rf"\bmemfile (?:{'|'.join(main.commands)})\b|(?<![\w-])--[a-z][a-z-]+")
#: A memory a person verified and made critical, as a file (an agent may neither change nor forget it).
PERSONS = "---\nid: mem_persons0001\npriority: critical\nverified: true\nsource: user\n---\nMy name is Michael.\n"


def command_lines(text: str) -> list[str]:
    return COMMAND_LINE.findall(text)


# --- the library: one error, said by each face -------------------------------------------------------


def test_an_error_with_a_hint_says_it_in_each_faces_words() -> None:
    error = NotFound("no memory 'x' in mind michael", hint="list")
    assert str(error) == "no memory 'x' in mind michael; list them with: memfile list"
    assert error.said(Face.CLI) == str(error)
    assert error.said(Face.HTTP).endswith("; find it with GET /memory/search?q=WORDS")
    assert error.said(Face.MCP).endswith("the `search` tool, or see them all with the `list` tool")
    assert error.said(Face.MEMORY_TOOL).endswith("; see the memory files with view /memories")
    plain = MemfileError("nothing to add")
    assert [plain.said(face) for face in Face] == ["nothing to add"] * len(Face)


def test_a_notice_says_its_hint_in_each_faces_words_and_keeps_it_through_the_store_queue(vault: Vault) -> None:
    notice = Notice("fact/x is superseded by fact/y: the update is kept", "reactivate", ["fact/x"])
    assert notice == "fact/x is superseded by fact/y: the update is kept; memfile reactivate fact/x brings it back"
    assert told(notice, Face.CLI) == notice
    assert told(notice, Face.HTTP).endswith("; a person brings it back with Reactivate on its page in the console")
    assert told(notice, Face.MCP).endswith("; ask the user to bring it back")
    assert told(notice, Face.CONSOLE).endswith("; Reactivate on its page brings it back")
    assert [told("the index was busy", face) for face in Face] == ["the index was busy"] * len(Face)
    result = StoreResult(vault.store("fact", "x", "x").memory, created=True, changed=True, notices=(notice, "plain"))
    again = decode(marshal.loads(marshal.dumps(encode(result)))).notices  # another process's store: a `.done` file
    assert [told(n, Face.MCP) for n in again] == [told(notice, Face.MCP), "plain"]


@pytest.mark.parametrize("name", sorted(HINTS))
def test_every_hint_names_the_command_line_only_on_the_command_line(name: str) -> None:
    hint = HINTS[name]
    for face in (Face.HTTP, Face.MCP, Face.MEMORY_TOOL, Face.CONSOLE):
        assert command_lines(hint.say(face, ["fact/x", "mem_x"])) == [], (name, face)
    assert hint.say(Face.CLI, ["fact/x", "mem_x"]) == hint.cli.format("fact/x", "mem_x")


# --- the command line keeps its own words ---------------------------------------------------------------


def test_the_command_line_names_its_commands_and_options(vault: Vault, tmp_path: Path) -> None:
    root = vault.root
    assert "list them with: memfile list" in fails(in_vault(root, "show", "fact/nope"), 3).stderr
    refused = fails(in_vault(root, "store", "fact", "ci", f"token {TOKEN}"), 2).stderr
    assert "--allow-secret" in refused and "allow_secret" not in refused
    agent = {"MEMFILE_SOURCE": "agent"}
    critical = fails(in_vault(root, "store", "fact", "x", "x", "--priority", "critical", env=agent), 2).stderr
    assert "a person can raise it with: memfile store CATEGORY KEY CONTENT --priority critical" in critical
    (vault.mind_dir / "identity").mkdir(exist_ok=True)
    (vault.mind_dir / "identity" / "name.md").write_text(PERSONS)
    assert "(memfile forget identity/name)" in fails(in_vault(root, "forget", "identity/name", env=agent), 2).stderr
    assert (
        "ask the user to run: memfile verify fact/x" in fails(in_vault(root, "verify", "fact/x", env=agent), 2).stderr
    )


def test_the_command_line_names_its_commands_in_notices_and_history(vault: Vault) -> None:
    root = vault.root
    expired = ok(in_vault(root, "store", "note", "gone", "x", "--expires", "2020-01-01")).stderr
    assert (
        "already past: it is stored, and out of recall and search; memfile list --include-expired shows it" in expired
    )
    vault.store("fact", "old", "old")
    vault.store("fact", "new", "new", supersedes="fact/old")
    update = ok(in_vault(root, "store", "fact", "old", "changed")).stderr
    assert "the update is kept, out of recall and search; memfile reactivate fact/old brings it back" in update
    assert fails(in_vault(root, "history", "fact/nope"), 3).stderr.rstrip().endswith("; see: memfile log")


def test_the_command_line_importer_names_include_dreams_as_its_option(vault: Vault, tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    shutil.copytree(REPO / "tests" / "fixtures" / "import" / "openclaw", workspace)
    out = ok(in_vault(vault.root, "import", str(workspace), "--dry-run")).stdout
    assert "DREAMS.md: the dream diary is skipped (import it with --include-dreams)" in out
    assert "include_dreams" not in out


# --- the HTTP API: its endpoints and fields ------------------------------------------------------------


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    made = make_setup(tmp_path_factory.mktemp("words"))
    (made.root / "michael" / "identity").mkdir(exist_ok=True)
    (made.root / "michael" / "identity" / "name.md").write_text(PERSONS)
    return made


def http_errors(server: Server, setup: Setup) -> dict[str, dict[str, Any]]:
    """The common errors of the HTTP API, by name: each answer's JSON and status."""
    agent, person = setup.tokens["michael"], setup.tokens["person"]
    asks = {
        "not found": ("GET", "/memory/nope", agent, None),
        "secret": ("POST", "/memory", agent, {"category": "fact", "key": "ci", "content": f"token {TOKEN}"}),
        "secret, a person": (
            "POST",
            "/memory?mind=michael",
            person,
            {"category": "fact", "key": "ci", "content": TOKEN},
        ),
        "agent allow_secret": (
            "POST",
            "/memory",
            agent,
            {"category": "fact", "key": "ci", "content": TOKEN, "allow_secret": True},
        ),
        "critical": (
            "POST",
            "/memory",
            agent,
            {"category": "fact", "key": "x", "content": "x", "priority": "critical"},
        ),
        "forget a person's": ("DELETE", "/memory/mem_persons0001", agent, None),
        "verify": ("POST", "/memory/mem_persons0001/verify", agent, None),
        "change a person's": ("POST", "/memory", agent, {"category": "identity", "key": "name", "content": "Mallory"}),
        "bad category": ("POST", "/memory", agent, {"category": "hobby", "key": "x", "content": "x"}),
        "bad priority": ("POST", "/memory", agent, {"category": "fact", "key": "x", "content": "x", "priority": "top"}),
    }
    answers = {}
    for name, (method, path, token, body) in asks.items():
        answer = server.request(method, path, token, body)
        assert answer.status >= 400, (name, answer.status, answer.body)
        answers[name] = {"status": answer.status} | answer.json()
    return answers


def test_the_http_api_names_its_endpoints_and_fields(server: Server, setup: Setup) -> None:
    answers = http_errors(server, setup)
    assert answers["not found"]["status"] == 404
    assert answers["not found"]["message"].endswith("; find it with GET /memory/search?q=WORDS")
    secret = answers["secret"]
    assert (secret["status"], secret["error"]) == (403, "SecretFound")
    assert "line 1 looks like a GitHub token" in secret["message"]
    assert "a person's token may send it again with allow_secret set to true" in secret["message"]
    assert "allow_secret set to true" in answers["secret, a person"]["message"]
    assert "only a person can store what looks like a secret" in answers["agent allow_secret"]["message"]
    assert 'PUT /memory/{id} and "priority": "critical"' in answers["critical"]["message"]
    assert "whose token can forget it: DELETE /memory/mem_persons0001" in answers["forget a person's"]["message"]
    assert "whose token can verify it: POST /memory/{id}/verify" in answers["verify"]["message"]
    for name, answer in answers.items():
        assert "--allow-secret" not in answer["message"] and "memfile list" not in answer["message"], name


def http_notices(server: Server, setup: Setup, key: str) -> dict[str, str]:
    """The notices of the HTTP API's writes (of memories named after `key`) and the error of its history
    endpoint, by name: each text."""
    agent = setup.tokens["michael"]

    def store(body: dict[str, Any]) -> list[str]:
        answer = server.request("POST", "/memory", agent, {"category": "fact", "content": "x"} | body)
        assert answer.status in (200, 201), (answer.status, answer.body)
        return answer.json()["notices"]

    store({"key": f"{key}_old"})
    store({"key": f"{key}_new", "supersedes": f"fact/{key}_old"})
    (expired,) = store({"key": f"{key}_gone", "expires_at": "2020-01-01"})
    (superseded,) = store({"key": f"{key}_old", "content": "changed"})
    history = server.request("GET", "/memory/mem_nope00000001/history", agent)
    assert history.status == 404, history.body
    return {"expired": expired, "superseded": superseded, "history": history.json()["message"]}


def test_the_http_api_tells_notices_and_history_in_its_words(server: Server, setup: Setup) -> None:
    said = http_notices(server, setup, "words")
    assert said["expired"].endswith(
        "already past: it is stored, and out of recall and search; GET /memory/search with include_expired finds it"
    )
    assert said["superseded"].endswith("; a person brings it back with Reactivate on its page in the console")
    assert said["history"].endswith("; a person sees the vault's changes on the Audit log page of the console")


# --- MCP: its tools, or what to ask the user ------------------------------------------------------------


def mcp_errors(root: Path) -> dict[str, str]:
    """The common errors of the MCP tools, by name: each tool error's text."""
    pytest.importorskip("mcp")
    from helpers.mcp import Agent, serve

    async def script(agent: Agent) -> dict[str, str]:
        calls = {
            "not found": ("show", {"ref": "fact/nope"}),
            "secret": ("store", {"category": "fact", "key": "ci", "content": f"token {TOKEN}"}),
            "critical": ("store", {"category": "fact", "key": "x", "content": "x", "priority": "critical"}),
            "forget a person's": ("forget", {"ref": "identity/name"}),
            "change a person's": ("store", {"category": "identity", "key": "name", "content": "Mallory"}),
            "bad category": ("store", {"category": "hobby", "key": "x", "content": "x"}),
            "memory: not found": ("memory", {"command": "delete", "path": "/memories/fact/nope.md"}),
            "memory: critical": (
                "memory",
                {"command": "create", "path": "/memories/fact/x.md", "file_text": "---\npriority: critical\n---\nx\n"},
            ),
            "memory: secret": ("memory", {"command": "create", "path": "/memories/fact/ci.md", "file_text": TOKEN}),
            "memory: a person's": (
                "memory",
                {"command": "str_replace", "path": "/memories/identity/name.md", "old_str": "Michael", "new_str": "M"},
            ),
        }
        return {name: await agent.error(tool, **args) for name, (tool, args) in calls.items()}

    return serve(root, script, mind="michael")


def test_the_mcp_tools_name_tools_and_ask_the_user(vault: Vault) -> None:
    (vault.mind_dir / "identity").mkdir(exist_ok=True)
    (vault.mind_dir / "identity" / "name.md").write_text(PERSONS)
    answers = mcp_errors(vault.root)
    assert answers["not found"].endswith("; find it with the `search` tool, or see them all with the `list` tool")
    assert answers["secret"].endswith(
        "; if it is not a secret, ask the user: a person may store it, or add a "
        "regex that matches it to allow = [...] under [secrets] in memfile.toml"
    )
    assert answers["critical"].endswith("; store it as high; ask the user if it must be critical")
    assert answers["memory: critical"].endswith("; store it as high; ask the user if it must be critical")
    assert answers["forget a person's"].endswith("so an agent cannot forget it; ask the user to forget it")


def mcp_notices(root: Path) -> dict[str, str]:
    """The notices the MCP `store` tool answers, by name."""
    pytest.importorskip("mcp")
    from helpers.mcp import Agent, serve

    async def told(agent: Agent, **store: Any) -> list[str]:
        """The texts after the stored memory's: a store's notices, as every tool's follow its answer."""
        result = await agent.call("store", **store)
        assert not result.is_error and "created" in json.loads(result.content[0].text)
        return [block.text for block in result.content[1:]]

    async def script(agent: Agent) -> dict[str, str]:
        await agent.ok("store", category="fact", key="old_office", content="x")
        await agent.ok("store", category="fact", key="new_office", content="x", supersedes="fact/old_office")
        (expired,) = await told(agent, category="note", key="gone", content="x", expires="2020-01-01")
        (superseded,) = await told(agent, category="fact", key="old_office", content="changed")
        return {"expired": expired, "superseded": superseded}

    return serve(root, script, mind="michael")


def test_the_mcp_store_tool_tells_its_notices_in_an_agents_words(vault: Vault) -> None:
    said = mcp_notices(vault.root)
    assert said["expired"].endswith("; store it again with a later `expires` to bring it back")
    assert said["superseded"].endswith("the update is kept, out of recall and search; ask the user to bring it back")


# --- the memory tool: its commands, or what to ask the user ------------------------------------------


def memory_tool_errors(vault: Vault) -> dict[str, str]:
    """The common errors of the memory tool, by name: each refusal's text."""
    tool = MemoryToolBackend(vault)
    commands = {
        "not found": {"command": "view", "path": "/memories/fact/nope.md"},
        "secret": {"command": "create", "path": "/memories/fact/ci.md", "file_text": f"token {TOKEN}"},
        "critical": {
            "command": "create",
            "path": "/memories/fact/x.md",
            "file_text": "---\npriority: critical\n---\nx",
        },
        "a person's": {"command": "delete", "path": "/memories/identity/name.md"},
        "edit a person's": {
            "command": "str_replace",
            "path": "/memories/identity/name.md",
            "old_str": "Michael",
            "new_str": "Mallory",
        },
        "not a memory file": {"command": "create", "path": "/memories/notes.txt", "file_text": "x"},
        "bad front-matter": {"command": "create", "path": "/memories/fact/y.md", "file_text": "---\nsource: [\n---\nx"},
    }
    answers = {}
    for name, command in commands.items():
        with pytest.raises(MemoryToolError) as caught:
            tool.run(command)
        answers[name] = str(caught.value)
    return answers


def test_the_memory_tool_says_ask_the_user_for_what_a_person_does(vault: Vault) -> None:
    (vault.mind_dir / "identity").mkdir(exist_ok=True)
    (vault.mind_dir / "identity" / "name.md").write_text(PERSONS)
    answers = memory_tool_errors(vault)
    assert answers["critical"].endswith("store it as high; ask the user if it must be critical")
    assert "/memories/fact/ci.md looks like it holds a secret" in answers["secret"]
    assert answers["a person's"] == (
        "No change was made: identity/name (/memories/identity/name.md) is verified by a person, so only a person "
        "can delete it. Create a new memory file with the correction instead, and tell the user, who can mark "
        "identity/name superseded by it."
    )
    assert answers["secret"].endswith(
        "ask the user: a person may store it, or add a regex that matches it to "
        "allow = [...] under [secrets] in memfile.toml"
    )


# --- the console: its pages and buttons -------------------------------------------------------------------


def console_errors(console: Console, key: str) -> dict[str, str]:
    """The common errors the console's pages show a person (of a memory named `key`), by name: each message."""
    client = console.person()
    console.store(key, "by the window")
    console.vault_call(lambda vault: vault.forget(f"fact/{key}"))
    second = console.store(key, "by the door")
    before = console.vault_call(lambda vault: vault.history(f"fact/{key}"))[-1].sha  # the first one's commit
    init = git(console.setup.root, "rev-list", "--max-parents=0", "HEAD").strip()
    upload = console.person()
    html = page(upload, f"/console/m/{MIND}/transfer")
    secret = upload.post(
        f"/console/m/{MIND}/transfer",
        data={"csrf": csrf_of(html), "action": "plan"},
        files={"file": ("MEMORY.md", f"# CI\n\nThe deploy token is {TOKEN}\n")},
        headers=SAME,
    )
    answers = {
        "not found": page(client, memory_url("nope"), 404),
        "restore before it existed": act(client, second.id, "restore", at=init).text,
        "restore over another": act(client, second.id, "restore", at=before).text,
        "secret": secret.text,
    }
    return {name: error_of(html) for name, html in answers.items()}


def error_of(html: str) -> str:
    """The error a console page shows (base.html's one alert)."""
    found = re.search(r'<p class="error" role="alert" id="error">([^<]*)</p>', html)
    assert found, html[-2000:]
    return unescape(found.group(1))


def test_the_console_names_its_pages_and_buttons(console: Console) -> None:
    said = console_errors(console, "desk")
    assert "no memory 'nope' in mind michael, on disk or in its history; see the Audit log page" in said["not found"]
    assert (
        "; restore its last version with Restore the last version on its page, or pick one there"
        in said["restore before it existed"]
    )
    assert (
        "restoring would replace it; forget it first (git keeps it) with Forget on its page"
        in said["restore over another"]
    )
    assert "the content looks like it holds a secret: line" in said["secret"]
    assert "add a regex that matches it to allow = [...] under [secrets] in memfile.toml" in said["secret"]
    for name, text in said.items():
        assert "GET /memory" not in text and "allow_secret" not in text, (name, text)


# --- the meta-test: no face but the command line names a command line -------------------------------


def test_no_answer_of_http_mcp_the_memory_tool_or_the_console_names_a_command_line_or_an_option(
    server: Server, setup: Setup, vault: Vault, console: Console
) -> None:
    (vault.mind_dir / "identity").mkdir(exist_ok=True)
    (vault.mind_dir / "identity" / "name.md").write_text(PERSONS)
    answers = {f"HTTP {name}": answer["message"] for name, answer in http_errors(server, setup).items()}
    answers |= {f"HTTP notice {name}": text for name, text in http_notices(server, setup, "meta").items()}
    answers |= {f"MCP {name}": text for name, text in mcp_errors(vault.root).items()}
    answers |= {f"MCP notice {name}": text for name, text in mcp_notices(vault.root).items()}
    answers |= {f"memory tool {name}": text for name, text in memory_tool_errors(vault).items()}
    answers |= {f"console {name}": text for name, text in console_errors(console, "meta").items()}
    leaks = {name: command_lines(text) for name, text in answers.items() if command_lines(text)}
    assert leaks == {}, {name: answers[name] for name in leaks}
