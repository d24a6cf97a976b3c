"""/mcp: the MCP server over streamable HTTP (`mcp_server.http_app`), beside the HTTP API.

The server does not wait for the MCP SDK's import at start-up: the first request to /mcp imports it
and starts its session manager (in a task of its own, which also stops it at shutdown). Every request
reaches it authenticated; a query parameter other than `mind` is refused with 400, as on every endpoint.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import sys
from typing import Any

from starlette.datastructures import QueryParams
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import InvalidInput
from .auth import MIND_PARAMETER
from .errors import error_response, memfile_error_response

#: The methods of /mcp: POST alone. The server is stateless (`mcp_server.HttpApp`): no session to end
#: (DELETE) and no stream of the server's own messages (GET, which would stay open and hold up a
#: shutdown); streamable HTTP lets a server answer both with 405, which Starlette does.
METHODS = ["POST"]


class McpMount:
    """The ASGI endpoint at /mcp, started on its first request."""

    def __init__(self, minds: Any) -> None:
        self.minds = minds
        self._app: ASGIApp | None = None
        self._failed: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()

    @staticmethod
    def available() -> bool:
        """Whether the MCP SDK is installed (the `mcp` extra), found without importing it."""
        return importlib.util.find_spec("mcp") is not None

    def route(self) -> Route:
        return Route("/mcp", self, methods=METHODS, name="/mcp")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        unknown = sorted({name for name in QueryParams(scope["query_string"]) if name != MIND_PARAMETER})
        if unknown:  # the SDK reads no query parameter: one sent is a mistake, not to pass unnoticed
            refused = InvalidInput(
                "query parameter",
                ", ".join(unknown),
                MIND_PARAMETER,
                reason="not a parameter of POST /mcp; a person's token names the mind with ?mind=NAME",
            )
            await memfile_error_response(refused)(scope, receive, send)
            return
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        await self._ready.wait()
        if self._app is None:
            message = f"the MCP server could not start ({self._failed}); the server's log has the details"
            await error_response(503, "Unavailable", message)(scope, receive, send)
            return
        await self._app(scope, receive, send)

    async def _run(self) -> None:
        """Import and start the MCP server, serve until `stop`, then stop it, in this one task (the SDK's
        session manager runs a task group, which must be left by the task that entered it)."""
        try:
            module = await asyncio.to_thread(importlib.import_module, "memfile.mcp_server")
            app = module.http_app(self.minds)
            async with app.run():  # its session manager (`mcp_server.HttpApp.run`)
                self._app = app
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:  # noqa: BLE001 - /mcp answers 503; the HTTP API goes on
            self._failed = f"{type(exc).__name__}: {exc}"
            print(f"memfile serve: error: the MCP server failed: {self._failed}", file=sys.stderr, flush=True)
        finally:
            self._app = None
            self._ready.set()

    async def stop(self) -> None:
        """Stop the MCP server, if it was started (the application's shutdown)."""
        if self._task is not None:
            self._stop.set()
            await self._task
