"""memfile.anthropic_tool: the Anthropic SDK's memory tool backed by a vault, with the SDK's own types and
tool runner. No network: the Messages API is a small server on a loopback port that answers with the
replies a model would give, and records the requests the SDK built."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, commit_count, git

from memfile import Vault
from memfile.model import Source

pytestmark = pytest.mark.skipif(find_spec("anthropic") is None, reason="the Anthropic SDK is not installed")


def sdk() -> tuple[type[Exception], Any]:
    """The SDK's ToolError and memfile's tool on the SDK, imported when a test runs: importing the SDK takes
    seconds, which every collection of the suite (each xdist worker's) would pay otherwise."""
    from anthropic.lib.tools import ToolError

    from memfile.anthropic_tool import MemfileMemoryTool

    return ToolError, MemfileMemoryTool


def test_the_tool_registers_as_claudes_memory_tool(vault: Vault) -> None:
    _, MemfileMemoryTool = sdk()
    tool = MemfileMemoryTool(vault)
    assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"}
    assert tool.name == "memory"
    cached = MemfileMemoryTool(vault, cache_control={"type": "ephemeral"})
    assert cached.to_dict() == {"type": "memory_20250818", "name": "memory", "cache_control": {"type": "ephemeral"}}


def test_the_sdks_commands_run_on_the_vault(vault: Vault) -> None:
    ToolError, MemfileMemoryTool = sdk()
    tool = MemfileMemoryTool(vault)
    before = commit_count(vault.root)
    assert tool.call({"command": "create", "path": "/memories/preference/coffee.md", "file_text": "Black."}) == (
        "File created successfully at: /memories/preference/coffee.md"
    )
    assert commit_count(vault.root) == before + 1
    memory = vault.get("preference/coffee")
    assert (memory.content, memory.source) == ("Black.", Source.AGENT)
    shown = tool.call({"command": "view", "path": "/memories/preference/coffee.md", "view_range": [1, 2]})
    assert shown == "Here's the content of /memories/preference/coffee.md with line numbers:\n     1\t---\n     2\t" + (
        f"id: {memory.id}"
    )
    tool.call(
        {
            "command": "str_replace",
            "path": "/memories/preference/coffee.md",
            "old_str": "Black.",
            "new_str": "Flat white.",
        }
    )
    with pytest.raises(ToolError, match="would change the id"):  # a second fence: the front-matter would be body
        tool.call(
            {"command": "insert", "path": "/memories/preference/coffee.md", "insert_line": 1, "insert_text": "---"}
        )
    assert vault.get("preference/coffee").content == "Flat white."
    tool.call(
        {"command": "rename", "old_path": "/memories/preference/coffee.md", "new_path": "/memories/preference/tea.md"}
    )
    tool.call({"command": "delete", "path": "/memories/preference/tea.md"})
    assert [m.key for m in vault.memories()] == []


def test_a_refused_command_is_the_sdks_tool_error(vault: Vault) -> None:
    ToolError, MemfileMemoryTool = sdk()
    tool = MemfileMemoryTool(vault)
    with pytest.raises(ToolError) as caught:
        tool.call({"command": "view", "path": "/memories/../etc"})
    assert str(caught.value) == "Path /memories/../etc would escape /memories directory"
    with pytest.raises(ToolError, match="/memories/<category>/<key>.md"):
        tool.call({"command": "create", "path": "/memories/notes.txt", "file_text": "x"})


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("view", "The memory tool's input must be an object with a `command`, got: 'view'"),
        (None, "must be an object with a `command`"),
        ({}, "The memory tool's input has no `command`: one of view, create"),
        ({"command": "launch"}, "Unknown command: launch; the memory tool's commands are view"),
        ({"command": ["view"]}, "Unknown command: ['view']"),
        ({"command": "view", "path": 3}, "The view command needs `path` (text), which is not text: 3"),
        ({"command": "view", "path": "/memories/\ud800"}, "`path` is not valid text: character 11 is '\\ud800'"),
        ({"command": "view", "path": "/memories/loop/x.md"}, "goes through a symbolic link that leads in a circle"),
        ({"command": "create", "path": "/memories/note/" + "a" * 300 + ".md", "file_text": "x"}, "at most 200"),
        ({"command": "create", "path": "/memories/" + "a/" * 2000 + "x.md", "file_text": "x"}, "2000 folders down"),
        ({"command": "insert", "path": "/memories/note/x.md", "insert_line": "0", "insert_text": "x"}, "line number"),
    ],
)
def test_a_malformed_or_hostile_call_is_the_sdks_tool_error_with_a_sentence(
    vault: Vault, given: Any, said: str
) -> None:
    ToolError, MemfileMemoryTool = sdk()
    tool = MemfileMemoryTool(vault)
    (vault.mind_dir / "loop").symlink_to("loop")
    with pytest.raises(ToolError) as caught:  # never AttributeError, NotImplementedError or RuntimeError
        tool.call(given)
    assert said in str(caught.value)
    str(caught.value).encode("utf-8")


def test_insert_at_line_0_through_the_sdk_lands_below_the_front_matter(vault: Vault) -> None:
    _, MemfileMemoryTool = sdk()
    tool = MemfileMemoryTool(vault)
    tool.call({"command": "create", "path": "/memories/note/todo.md", "file_text": "- milk\n"})
    answer = tool.call(
        {"command": "insert", "path": "/memories/note/todo.md", "insert_line": 0, "insert_text": "# Todo"}
    )
    assert "Line 0 is the top of the memory's text, below its front-matter" in str(answer)
    assert vault.get("note/todo").content == "# Todo\n- milk"


# --- the Messages API tool loop ------------------------------------------------------------------


class FakeMessagesAPI:
    """`POST /v1/messages` on a loopback port: answers with `replies` in turn, records each request's JSON."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = replies
        self.requests: list[dict[str, Any]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["content-length"]))
                api.requests.append(
                    {"path": self.path, "json": json.loads(body), "beta": self.headers["anthropic-beta"]}
                )
                reply = json.dumps(api.replies[len(api.requests) - 1]).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeMessagesAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def message(n: int, content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def tool_use(n: int, command: dict[str, Any]) -> dict[str, Any]:
    return message(n, [{"type": "tool_use", "id": f"toolu_{n}", "name": "memory", "input": command}], "tool_use")


REPLIES = [
    tool_use(1, {"command": "view", "path": "/memories"}),
    tool_use(2, {"command": "create", "path": "/memories/coffee.txt", "file_text": "Black, no sugar."}),
    tool_use(3, {"command": "create", "path": "/memories/preference/coffee.md", "file_text": "Black, no sugar."}),
    message(4, [{"type": "text", "text": "Noted: black, no sugar."}], "end_turn"),
]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI(REPLIES) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")
        yield fake


def run_example(code: str, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]) -> None:
    """The example as a reader runs it (its vault at ~/memories, HOME being a test folder), then what the
    SDK sent and what reached the vault."""
    vault = Vault.init(Path.home() / "memories", "assistant")
    exec(compile(code, "example", "exec"), {})  # noqa: S102 - the documentation's own example
    assert capsys.readouterr().out == "Noted: black, no sugar.\n"
    first, *results = api.requests
    assert (
        first["path"].startswith("/v1/messages")
        and {"type": "memory_20250818", "name": "memory"} in first["json"]["tools"]
    )
    answers = [r["json"]["messages"][-1]["content"][0] for r in results]
    assert [a["tool_use_id"] for a in answers] == ["toolu_1", "toolu_2", "toolu_3"]
    assert answers[0]["content"].startswith("Here're the files and directories up to 2 levels deep in /memories")
    assert answers[1]["is_error"] is True and "/memories/<category>/<key>.md" in answers[1]["content"]
    assert answers[2]["content"] == "File created successfully at: /memories/preference/coffee.md"
    assert not answers[2].get("is_error")
    memory = vault.get("preference/coffee")
    assert (memory.content, memory.source, memory.verified) == ("Black, no sugar.", Source.AGENT, False)
    assert git(vault.root, "log", "-1", "--format=%s").strip() == "store preference/coffee (agent)"


EXAMPLE = """
import anthropic

from memfile import Vault
from memfile.anthropic_tool import MemfileMemoryTool

vault = Vault.open("~/memories", mind="assistant")
memory = MemfileMemoryTool(vault)
client = anthropic.Anthropic()

runner = client.beta.messages.tool_runner(
    model="claude-sonnet-4-5",
    max_tokens=2048,
    tools=[memory],
    messages=[{"role": "user", "content": "I take my coffee black, no sugar. Please remember that."}],
)
reply = runner.until_done()
print(reply.content[-1].text)
"""


def test_a_tool_runner_loop_runs_the_models_commands_on_the_vault(
    api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    run_example(EXAMPLE, api, capsys)


def docs_example(text: str) -> str | None:
    """The first Python block of the "Claude's memory tool" section, or None without the section."""
    section = re.search(r"^## Claude's memory tool\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    block = re.search(r"```python\n(.*?)```", section.group(1), re.DOTALL) if section else None
    return block.group(1) if block else None


def test_the_docs_example_runs(api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]) -> None:
    code = docs_example((REPO / "docs" / "agents.md").read_text(encoding="utf-8"))
    if code is None:
        pytest.skip('docs/agents.md has no "Claude\'s memory tool" section with a Python example yet')
    run_example(code, api, capsys)


def test_the_sdks_typed_commands_run_through_the_same_backend(vault: Vault) -> None:
    from anthropic.types.beta import BetaMemoryTool20250818CreateCommand, BetaMemoryTool20250818ViewCommand

    ToolError, MemfileMemoryTool = sdk()
    tool = MemfileMemoryTool(vault)
    create = BetaMemoryTool20250818CreateCommand(command="create", path="/memories/fact/x.md", file_text="X.")
    assert tool.execute(create) == "File created successfully at: /memories/fact/x.md"
    assert tool.view(BetaMemoryTool20250818ViewCommand(command="view", path="/memories/fact")).endswith(
        "/memories/fact/x.md"
    )
    with pytest.raises(ToolError, match="already exists"):
        tool.create(create)
