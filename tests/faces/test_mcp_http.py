"""The MCP server over streamable HTTP (`mcp_server.http_app`), as `memfile serve` mounts it at /mcp.

A real uvicorn on a free loopback port runs a minimal Starlette app of this
test: its middleware stands in for the serving app's authentication (a
token -> the `Caller` at `scope["memfile.caller"]`), and the SDK's own
streamable-HTTP client drives it. Two minds, alice and bob; an agent's key of
each, and a person's token acting in alice.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp.client.streamable_http", reason="the MCP SDK is the optional extra memfile-vault[mcp]")

import anyio  # noqa: E402 - after the importorskip: these come with the SDK
import httpx2  # noqa: E402
import uvicorn  # noqa: E402
from helpers import git  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.responses import JSONResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402
from starlette.types import ASGIApp, Receive, Scope, Send  # noqa: E402

from memfile import Vault  # noqa: E402
from memfile.mcp_server import TOOL_NAMES, build_server, http_app  # noqa: E402
from memfile.model import Source  # noqa: E402
from memfile.worker import Caller, Minds  # noqa: E402

TOKENS = {
    "agent-alice": Caller("alice", Source.AGENT, "bot-alice"),
    "agent-bob": Caller("bob", Source.AGENT, "bot-bob"),
    "person-alice": Caller("alice", Source.USER, "michael-laptop"),
    "agent-nowhere": Caller("nowhere", Source.AGENT, "bot-lost"),
}
PASS_THROUGH = "no-caller"  # let through without a Caller: the endpoint's own guard answers
CALL_TIMEOUT = 30.0


class FakeAuth:
    """Stands in for the serving app's authentication middleware: Bearer token -> scope["memfile.caller"]."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            token = headers.get(b"authorization", b"").decode().removeprefix("Bearer ")
            if token in TOKENS:
                scope["memfile.caller"] = TOKENS[token]
            elif token != PASS_THROUGH:
                response = JSONResponse({"error": "Unauthorized", "message": "no valid credential"}, 401)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Served:
    """A real uvicorn serving the test app on a free loopback port, in a thread."""

    def __init__(self, root: Path) -> None:
        self.minds = Minds(root)
        endpoint = http_app(self.minds)

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            async with endpoint.run():
                yield

        app = Starlette(routes=[Route("/mcp", endpoint=endpoint)], lifespan=lifespan)
        app.add_middleware(FakeAuth)
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}/mcp"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()
        self.minds.close()
        assert not self.thread.is_alive()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    Vault.init(tmp_path / "vault", "alice").close()
    Vault.init(tmp_path / "vault", "bob").close()
    return tmp_path / "vault"


@pytest.fixture
def served(root: Path) -> Iterator[Served]:
    with Served(root) as running:
        yield running


def session_of(served: Served, token: str) -> Callable[[Callable[[ClientSession], Awaitable[Any]]], Any]:
    """Run a script with one initialized MCP session over HTTP, as `token`; returns the script's result."""

    def run(script: Callable[[ClientSession], Awaitable[Any]]) -> Any:
        async def main() -> Any:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=CALL_TIMEOUT) as http:
                async with streamable_http_client(served.url, http_client=http) as (read, write):
                    async with ClientSession(read, write) as session:
                        with anyio.fail_after(CALL_TIMEOUT):
                            await session.initialize()
                            return await script(session)

        return anyio.run(main)

    return run


def data(result: Any) -> Any:
    """A successful tool call's structured result (unwrapped for list and text results)."""
    assert not result.is_error, [getattr(block, "text", block) for block in result.content]
    content = result.structured_content
    return content["result"] if set(content) == {"result"} else content


def error(result: Any) -> str:
    assert result.is_error, result
    return " ".join(getattr(block, "text", "") for block in result.content)


def test_the_tools_over_http_are_the_stdio_tools(served: Served) -> None:
    async def script(session: ClientSession) -> Any:
        return (await session.list_tools()).tools

    tools = session_of(served, "agent-alice")(script)
    assert sorted(tool.name for tool in tools) == sorted(TOOL_NAMES)
    same = anyio.run(build_server(served.minds, lambda ctx: TOKENS["agent-alice"]).list_tools)
    assert [tool.model_dump(mode="json") for tool in tools] == [tool.model_dump(mode="json") for tool in same]


def test_an_agent_stores_recalls_and_searches_in_its_mind(served: Served, root: Path) -> None:
    async def script(session: ClientSession) -> Any:
        stored = data(await session.call_tool("store", {"category": "fact", "key": "wifi", "content": "zebra42"}))
        recalled = data(await session.call_tool("recall", {"query": "zebra42"}))
        hits = data(await session.call_tool("search", {"query": "zebra42"}))
        return stored, recalled, hits

    stored, recalled, hits = session_of(served, "agent-alice")(script)
    assert stored["created"] and stored["source"] == "agent" and stored["verified"] is False
    assert "zebra42" in recalled
    assert [hit["key"] for hit in hits] == ["wifi"]
    assert (root / "alice" / "fact" / "wifi.md").is_file()
    assert not (root / "bob" / "fact" / "wifi.md").exists()
    body = git(root, "log", "-1", "--format=%B")
    assert body.startswith("store fact/wifi (agent)") and "Memfile-Key: bot-alice" in body


def test_an_agent_cannot_store_critical_a_person_can(served: Served, root: Path) -> None:
    critical = {"category": "fact", "key": "allergy", "content": "peanuts", "priority": "critical"}

    async def as_agent(session: ClientSession) -> str:
        return error(await session.call_tool("store", critical))

    async def as_person(session: ClientSession) -> Any:
        return data(await session.call_tool("store", critical))

    before = git(root, "rev-list", "--count", "HEAD")
    assert "critical" in session_of(served, "agent-alice")(as_agent)
    assert not (root / "alice" / "fact" / "allergy.md").exists()
    assert git(root, "rev-list", "--count", "HEAD") == before
    stored = session_of(served, "person-alice")(as_person)
    assert stored["priority"] == "critical" and stored["source"] == "user"
    assert "Memfile-Key: michael-laptop" in git(root, "log", "-1", "--format=%B")


def test_calls_land_in_the_callers_mind_only(served: Served, root: Path) -> None:
    async def alice(session: ClientSession) -> Any:
        return data(await session.call_tool("store", {"category": "fact", "key": "secret", "content": "okapi7"}))

    async def bob(session: ClientSession) -> Any:
        hits = data(await session.call_tool("search", {"query": "okapi7"}))
        listed = data(await session.call_tool("list", {}))
        shown = error(await session.call_tool("show", {"ref": "fact/secret"}))
        forgotten = error(await session.call_tool("forget", {"ref": "fact/secret"}))
        return hits, listed, shown, forgotten

    session_of(served, "agent-alice")(alice)
    hits, listed, shown, forgotten = session_of(served, "agent-bob")(bob)
    assert hits == [] and listed == []
    assert "secret" in shown and "secret" in forgotten  # not found in bob's mind
    assert (root / "alice" / "fact" / "secret.md").is_file()


def test_many_callers_at_once_each_act_as_themselves(served: Served, root: Path) -> None:
    """Agents and a person store at the same time: each memory is in its caller's mind, with its source."""

    async def main() -> None:
        async def one(token: str, n: int) -> None:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=CALL_TIMEOUT) as http:
                async with streamable_http_client(served.url, http_client=http) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        for i in range(3):
                            key = f"{token.replace('-', '_')}_{n}_{i}"
                            args = {"category": "note", "key": key, "content": f"from {token}"}
                            data(await session.call_tool("store", args))

        with anyio.fail_after(120):
            async with anyio.create_task_group() as group:
                for n in range(2):
                    for token in ("agent-alice", "agent-bob", "person-alice"):
                        group.start_soon(one, token, n)

    anyio.run(main)
    for token, caller in TOKENS.items():
        for path in (root / caller.mind / "note").glob(f"{token.replace('-', '_')}_*.md"):
            assert f"source: {caller.source.value}" in path.read_text(encoding="utf-8"), path
    assert len(list((root / "alice" / "note").glob("*.md"))) == 12
    assert len(list((root / "bob" / "note").glob("*.md"))) == 6


def test_a_caller_of_a_mind_that_does_not_exist_gets_a_tool_error(served: Served, root: Path) -> None:
    async def script(session: ClientSession) -> str:
        return error(await session.call_tool("search", {"query": "anything"}))

    assert "nowhere" in session_of(served, "agent-nowhere")(script)
    assert not (root / "nowhere").exists()


def test_a_tool_call_without_a_caller_is_refused(served: Served, root: Path) -> None:
    """Defence in depth: if the serving app's authentication let a request through without a Caller."""

    async def script(session: ClientSession) -> tuple[str, str]:
        args = {"category": "fact", "key": "x", "content": "y"}
        return error(await session.call_tool("store", args)), error(await session.call_tool("recall", {}))

    stored, recalled = session_of(served, PASS_THROUGH)(script)
    assert "no credential" in stored and "no credential" in recalled
    assert not (root / "alice" / "fact" / "x.md").exists()
