"""The MCP server as an agent drives it: `memfile mcp` started as a real process, the official SDK client over
its stdio (tests/faces/test_mcp.py, and every other test that goes through the MCP face). Needs the MCP SDK,
the optional extra memfile-vault[mcp]: without it, a test importing this module is skipped.

(Not a test module: pytest collects no test here.)
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp.client.stdio", reason="the MCP SDK is the optional extra memfile-vault[mcp]")

import anyio  # noqa: E402 - after the importorskip: anyio comes with the SDK
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

#: Tools whose result is not an object: the SDK wraps it as structured content {"result": ...}.
WRAPPED = {"recall", "search", "list", "expiring", "tags"}
#: The longest any single call may take before the test fails instead of hanging.
CALL_TIMEOUT = 30.0


class Agent:
    """One MCP session: `call` returns the raw CallToolResult; `ok`/`error` assert the outcome."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session
        self.texts: list[str] = []  # every text the server sent back, for leak checks
        self.unexpected: list[str] = []  # tool errors from memfile's catch-all: an exception that is not a MemfileError

    async def call(self, name: str, **args: Any) -> Any:
        result = await self.session.call_tool(name, args)
        self.texts.extend(getattr(block, "text", "") for block in result.content)
        if result.is_error and any("failed unexpectedly" in getattr(b, "text", "") for b in result.content):
            self.unexpected.append(f"{name}({args!r}): {result.content[0].text[:500]}")  # a bug, not a bad call
        if result.structured_content is not None:
            self.texts.append(json.dumps(result.structured_content, ensure_ascii=False))
        return result

    async def ok(self, name: str, **args: Any) -> Any:
        """The tool's structured result (unwrapped for list and text results); fails on a tool error."""
        result = await self.call(name, **args)
        assert not result.is_error, (name, args, [getattr(b, "text", b) for b in result.content])
        data = result.structured_content
        assert data is not None, (name, result)
        return data["result"] if name in WRAPPED else data

    async def error(self, name: str, **args: Any) -> str:
        """The message of a tool error; fails when the call succeeds."""
        result = await self.call(name, **args)
        text = " ".join(getattr(block, "text", "") for block in result.content)
        assert result.is_error, (name, args, text[:500])
        return text


def server_params(root: Path, mind: str | None = None, watch: bool = True) -> StdioServerParameters:
    args = ["-m", "memfile", "--vault", str(root)]
    if mind:
        args += ["--mind", mind]
    args.append("mcp")
    if not watch:
        args.append("--no-watch")
    # The whole environment: the server must see the test's blank HOME and git config.
    return StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ), cwd=str(root.parent))


def serve(root: Path, script: Callable[[Agent], Awaitable[Any]], mind: str | None = None, watch: bool = True) -> Any:
    """Start the server on `root`, run `script` with one initialized session, stop the server; returns its result."""
    errlog_path = root.parent / f"mcp-server-{time.monotonic_ns()}.err"

    async def main() -> Any:
        with open(errlog_path, "w", encoding="utf-8") as errlog:
            async with stdio_client(server_params(root, mind, watch), errlog=errlog) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT) as session:
                    with anyio.fail_after(CALL_TIMEOUT):
                        await session.initialize()
                    agent = Agent(session)
                    result = await script(agent)
                    assert agent.unexpected == [], agent.unexpected
                    return result

    result = anyio.run(main)
    stderr = errlog_path.read_text(encoding="utf-8")
    assert "Traceback" not in stderr, stderr[-3000:]
    return result
