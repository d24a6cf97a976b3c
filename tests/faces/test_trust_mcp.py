"""The MCP face on hostile and careless input (issue 21, items 17, 18 and 21), and the query size cap on every face.

Requests the SDK client cannot even send (a lone surrogate, JSON nested 100,000
deep, a line that is not JSON) go through a raw JSON-RPC client over the real
server's stdin and stdout; everything else goes through the official SDK client
(`test_mcp.serve`). Time bounds are generous (a tenth of what the broken code
took at least), so they never depend on the machine's load.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp.client.stdio", reason="the MCP SDK is the optional extra memfile-vault[mcp]")

from helpers import fails, in_vault, ok, write  # noqa: E402
from test_mcp import Agent, serve  # noqa: E402

from memfile import Vault  # noqa: E402
from memfile.config import DEFAULT_MCP_RECALL_BUDGET  # noqa: E402
from memfile.errors import InvalidInput  # noqa: E402

#: The documented query size limit (characters), public like the exit codes.
MAX_QUERY_CHARS = 4096
#: Longest wait for one answer of the raw client (the broken server never answered in 60 s).
ANSWER_TIMEOUT = 20.0
#: Longest a refused or cheap long query may take (20 to 44 s before the cap).
QUICK = 10.0

LONG_WORD = "a" * 80_000
BIG_QUERY = "ordinary words of a pasted document " * 300_000  # about 10 MB


# --- a raw JSON-RPC client --------------------------------------------------------------


class RawServer:
    """`memfile mcp` driven line by line: what an agent's client writes, byte for byte."""

    def __init__(self, root: Path) -> None:
        argv = [sys.executable, "-m", "memfile", "--vault", str(root), "mcp", "--no-watch"]
        self.errlog = root.parent / f"raw-mcp-{time.monotonic_ns()}.err"
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errlog.open("wb"), env=dict(os.environ)
        )
        self.replies: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.replies.put(line)

    def send(self, line: str) -> None:
        """Write one line; a lone surrogate in `line` goes out as the `\\ud800` escape a JSON encoder makes."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode("utf-8", "surrogatepass") + b"\n")
        self.proc.stdin.flush()

    def answer(self) -> dict[str, Any]:
        try:
            return json.loads(self.replies.get(timeout=ANSWER_TIMEOUT))
        except queue.Empty:
            raise AssertionError(f"no answer within {ANSWER_TIMEOUT} s") from None

    def start(self) -> None:
        self.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "raw", "version": "0"},
                    },
                }
            )
        )
        assert self.answer()["id"] == 1
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def call(self, id_: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.send(
            json.dumps(
                {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
            )
        )
        return self.answer()

    def stop(self) -> str:
        """Close stdin, wait for the server to exit; its stderr."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        return self.errlog.read_text(encoding="utf-8", errors="replace")


def _message(reply: dict[str, Any]) -> str:
    """The text of a tool error or a JSON-RPC error; fails on a success."""
    if "error" in reply:
        return reply["error"]["message"]
    result = reply["result"]
    assert result.get("isError") is True, reply
    return " ".join(block.get("text", "") for block in result["content"])


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


# --- item 17: every request gets an answer ---------------------------------------------


def test_a_lone_surrogate_deep_nesting_or_a_broken_line_is_answered_and_the_server_goes_on(sample_copy: Path) -> None:
    server = RawServer(sample_copy)
    try:
        server.start()
        call = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s}}'
        cases: list[tuple[str, int | None, list[str]]] = [
            # a model that split an emoji: valid JSON, not a whole character
            (call % (2, "search", '{"query":"bad \\ud800 x"}'), 2, ["surrogate", "query"]),
            (
                call % (3, "store", '{"category":"fact","key":"k","content":"half \\udc00 an emoji"}'),
                3,
                ["surrogate", "content"],
            ),
            (call % (4, "search", '{"qu\\ud83dery":"x"}'), 4, ["surrogate"]),
            (call % (5, "search", '{"query":%s}' % _deep(100_000)), 5, ["nested"]),
            (call % (6, "store", '{"category":"fact","key":"k","content":"c","tags":%s}' % _deep(300)), 6, []),
            (call % (7, "search", '{"query":%s}' % _deep(150)), 7, []),  # deep, within what the parser reads
            # the id after a deep member: still found
            (
                '{"jsonrpc":"2.0","method":"tools/call","params":{"name":"search","arguments":{"query":%s}},"id":8}'
                % _deep(100_000),
                8,
                ["nested"],
            ),
            ('{"jsonrpc":"2.0","id":"nine","method":5}', "nine", []),  # JSON, but not a JSON-RPC request
            ("this is not JSON", None, ["JSON"]),
            (
                '{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"search","arguments":{"query":"x"}',
                10,
                [],
            ),  # cut short
        ]
        for line, expected_id, words in cases:
            started = time.monotonic()
            server.send(line)
            reply = server.answer()
            assert reply.get("id") == expected_id, (line[:120], reply)
            text = _message(reply)
            assert text and all(word in text for word in words), (line[:120], text)
            assert time.monotonic() - started < ANSWER_TIMEOUT
        after = server.call(11, "search", {"query": "postgres backup"})
        assert after["id"] == 11 and not after["result"].get("isError"), after
        assert "postgres_backup" in json.dumps(after)
    finally:
        stderr = server.stop()
    assert "Traceback" not in stderr, stderr[-3000:]
    assert not (sample_copy / "michael" / "fact" / "k.md").exists()


# --- item 18: the query size cap, on every face ------------------------------------------


def test_the_python_api_refuses_a_long_query_quickly_and_names_the_limit(vault: Vault) -> None:
    vault.store("fact", "alpha", "alpha bravo charlie")
    for text in (LONG_WORD, BIG_QUERY, "x" * (MAX_QUERY_CHARS + 1)):
        for name, call in (
            ("search", lambda: vault.search(text)),
            ("recall", lambda: vault.recall(query=text)),
            ("recall_items", lambda: vault.recall(query=text).items),
        ):
            started = time.monotonic()
            with pytest.raises(InvalidInput) as caught:
                call()
            assert time.monotonic() - started < QUICK, (name, len(text))
            message = str(caught.value)
            assert f"{MAX_QUERY_CHARS:,}" in message and "characters" in message, message
            assert len(message) < 600, (name, len(message))  # the query is not echoed whole
            assert caught.value.field == "query"
    for text in ("bad \ud800 x", 42):  # half a character (a Python caller's), or not text at all
        with pytest.raises(InvalidInput, match="query"):
            vault.search(text)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="query"):
            vault.recall(query=text)  # type: ignore[arg-type]
    # at the limit: answered, and quickly even as one long word
    assert [hit.memory.key for hit in vault.search("alpha " + "b" * (MAX_QUERY_CHARS - 6))] == ["alpha"]
    started = time.monotonic()
    assert vault.search("q" * MAX_QUERY_CHARS) == []
    assert vault.search("ก" * MAX_QUERY_CHARS) == []  # Thai: bigrams
    assert time.monotonic() - started < QUICK


def test_the_cli_refuses_a_long_query_quickly(vault: Vault) -> None:
    vault.store("fact", "alpha", "alpha bravo charlie")
    root = vault.root
    vault.close()
    word = "a" * 100_000
    words = "hello world " * 8_000  # 96 KB: about the most one argument may hold
    for args in (("search", word), ("search", words), ("recall", "--query", word), ("recall", "--query", words)):
        started = time.monotonic()
        result = fails(in_vault(root, *args), 2)
        assert time.monotonic() - started < QUICK, args[:-1]
        assert f"{MAX_QUERY_CHARS:,}" in result.stderr and len(result.stderr) < 800, result.stderr[:800]
    assert "alpha" in ok(in_vault(root, "search", "alpha")).stdout


def test_mcp_refuses_a_long_query_quickly_and_keeps_answering(vault: Vault) -> None:
    vault.store("fact", "alpha", "alpha bravo charlie")
    root = vault.root
    vault.close()

    async def script(agent: Agent) -> list[Any]:
        out = []
        for tool, args in (
            ("search", {"query": LONG_WORD}),
            ("recall", {"query": LONG_WORD}),
            ("search", {"query": BIG_QUERY}),
            ("recall", {"query": BIG_QUERY}),
        ):
            started = time.monotonic()
            message = await agent.error(tool, **args)
            out.append((tool, len(args["query"]), time.monotonic() - started, message))
        out.append(await agent.ok("search", query="alpha"))
        return out

    *refused, after = serve(root, script, watch=False)
    for tool, size, took, message in refused:
        assert took < QUICK, (tool, size, took)
        assert f"{MAX_QUERY_CHARS:,}" in message and len(message) < 600, (tool, message[:600])
    assert [hit["key"] for hit in after] == ["alpha"]


# --- item 21: errors for agents, unknown arguments, recall's budget ---------------------------

#: What an agent cannot act on: a command line, an exit code, a file that does not ship.
CLI_TALK = re.compile(
    r"memfile (?:init|recall|search|store|show|list|forget|verify|edit|reactivate|doctor|sync"
    r"|resolve|history|log|restore|undo|remote|mcp|watch|expiring|tags)\b"
    r"|exit code|SPEC|--[a-z]|memfile error"
)


def test_tool_errors_and_descriptions_speak_to_an_agent(sample_copy: Path) -> None:
    async def script(agent: Agent) -> dict[str, Any]:
        listing = await agent.session.list_tools()
        return {
            "descriptions": {tool.name: tool.description for tool in listing.tools},
            "not_found": await agent.error("show", ref="no_such_memory"),
            "forget_missing": await agent.error("forget", ref="fact/no_such_memory"),
            "forget_verified": await agent.error("forget", ref="preference/favorite_food"),
            "forget_critical": await agent.error("forget", ref="identity/user_name"),
            "critical": await agent.error("store", category="fact", key="k", content="c", priority="critical"),
            "bad_category": await agent.error("list", category="nope"),
            "bad_query": await agent.error("search", query="the a is"),
        }

    out = serve(sample_copy, script)
    for name, text in out.pop("descriptions").items():
        assert not CLI_TALK.search(text or ""), (name, CLI_TALK.search(text or ""))
    for name, text in out.items():
        assert not CLI_TALK.search(text), (name, text)
    assert "`list`" in out["not_found"] or "`search`" in out["not_found"], out["not_found"]
    assert "`search`" in out["forget_missing"] or "`list`" in out["forget_missing"], out["forget_missing"]
    assert "ask the user" in out["forget_verified"] and "ask the user" in out["forget_critical"]
    assert "high" in out["critical"] and "ask the user" in out["critical"]


def test_unknown_arguments_are_refused_by_name(sample_copy: Path) -> None:
    async def script(agent: Agent) -> dict[str, Any]:
        return {
            "verified": await agent.error("store", category="fact", key="claimed", content="c", verified=True),
            "source": await agent.error("store", category="fact", key="claimed", content="c", source="user"),
            "typo": await agent.error("search", querry="postgres"),
            "two": await agent.error("list", catgory="fact", unverifed=True),
            "recall": await agent.error("recall", quer="postgres", budget=100),
            "tags": await agent.error("tags", all=True),
            "fine": await agent.ok("search", query="postgres"),
        }

    out = serve(sample_copy, script)
    assert "verified" in out["verified"] and "category" in out["verified"]  # the bad name and the good ones
    assert "source" in out["source"]
    assert "querry" in out["typo"] and "query" in out["typo"]
    assert "catgory" in out["two"] and "unverifed" in out["two"]
    assert "quer" in out["recall"] and "'quer'" in out["recall"]
    assert "'all'" in out["tags"]
    assert out["fine"]
    assert not (sample_copy / "michael" / "fact" / "claimed.md").exists()


def test_recall_over_mcp_has_a_default_budget(vault: Vault) -> None:
    root = vault.root
    vault.store("fact", "short", "a short fact to recall")
    vault.close()
    paste = "A pasted log line that goes on and on. " * 52_000  # about 2 MB
    write(root / "michael" / "note" / "paste.md", "---\ncategory: note\nkey: paste\n---\n" + paste)

    async def script(agent: Agent) -> tuple[str, ...]:
        return (
            await agent.ok("recall"),
            await agent.ok("recall", query="pasted log"),
            await agent.ok("recall", limit=3),
            await agent.ok("recall", budget=0),
        )

    *bounded, unlimited = serve(root, script, watch=False)
    budget = DEFAULT_MCP_RECALL_BUDGET  # `[mcp] recall_budget` when memfile.toml does not set it
    assert budget == 2000
    for text in bounded:
        assert len(text) <= budget * 4 + 2000, len(text)
        assert "short" in text and "paste" in text
        assert not CLI_TALK.search(text), CLI_TALK.search(text)  # the closing line names the `show` tool
    assert len(unlimited) > 2_000_000  # no limit, when the agent asks for none (budget 0)
    with Vault.open(root) as again:  # the library and the CLI keep their own default: the whole mind
        assert len(again.recall()) > 1_000_000


def test_recall_over_mcp_follows_the_budget_of_memfile_toml(vault: Vault) -> None:
    root = vault.root
    for n in range(40):
        vault.store("fact", f"fact_{n}", f"fact number {n} with a few words to fill the recall " * 3)
    vault.close()
    config = root / "memfile.toml"
    config.write_text(config.read_text(encoding="utf-8") + "\n[mcp]\nrecall_budget = 300\n", encoding="utf-8")

    async def script(agent: Agent) -> tuple[str, str]:
        listing = await agent.session.list_tools()
        description = next(tool.description for tool in listing.tools if tool.name == "recall")
        return await agent.ok("recall"), description or ""

    text, description = serve(root, script, watch=False)
    assert len(text) <= 300 * 4 + 400, len(text)
    assert "300 tokens" in description
