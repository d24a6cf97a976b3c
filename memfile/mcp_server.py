"""The MCP face: a stdio Model Context Protocol server over one mind, for LLM agents.

Built on the official `mcp` SDK (the optional extra `memfile[mcp]`). The
server opens the vault as an agent (`source: agent`: everything it stores is
unverified, and the library's agent rules apply) and bound to one mind: every
tool goes through `Vault`, which refuses REFs that leave the mind. A watcher
keeps the index warm in process, so search and recall skip the stat check.
Errors come back as tool errors that say what to do instead; the server
itself never stops on a bad call.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from .errors import Conflict, MemfileError
from .vault import Vault

INSTRUCTIONS = """Long-term memory of one person ("mind"), kept as files.
Call `recall` with the user's request at the start of a task to get what you must know.
Call `search` before answering a question about the past or before storing (to avoid duplicates).
Call `store` when you learn a durable fact, preference, decision or mistake worth remembering;
use `supersedes` when the new memory corrects or replaces an older one (do not store contradictions).
You store as an agent: your memories are unverified until the person verifies them."""

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


def _doc(method: Any, when: str) -> str:
    """A tool's description: when to use it, then the Vault method's own docstring."""
    return f"{when}\n\n{inspect.getdoc(method) or ''}"


def build_server(vault: Vault, worker: ThreadPoolExecutor) -> MCPServer:
    """The MCP server of one opened vault (one mind); every Vault call runs in `worker`, a single thread."""
    server = MCPServer("memfile", instructions=INSTRUCTIONS)

    def run(method: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except MemfileError as exc:
            raise ToolError(f"{exc} (memfile error {type(exc).__name__}, exit code {exc.exit_code})") from None
        except Exception as exc:  # noqa: BLE001 - a tool call must never take the server down
            raise ToolError(f"memfile failed unexpectedly: {type(exc).__name__}: {exc}") from None

    async def call(method: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(worker, functools.partial(run, method, *args, **kwargs))

    @server.tool(description=_doc(Vault.recall, "Call at the start of a task with the user's request as `query`: "
                                  "the memories to keep in mind (pinned profile, then the best matches), within a budget."),
                 annotations=READ)
    async def recall(query: str | None = None, budget: int | None = None, limit: int = 10) -> str:
        options: dict[str, Any] = {"query": query, "limit": limit}
        if budget is not None:
            options["budget"] = budget
        return await call(vault.recall, **options)

    @server.tool(description=_doc(Vault.search, "Find memories about a topic, best first."), annotations=READ)
    async def search(query: str, tags: list[str] | None = None, category: str | None = None, priority: str | None = None,
               limit: int = 10) -> list[dict[str, Any]]:
        hits = await call(vault.search, query, tags=tags, category=category, priority=priority, limit=limit)
        return [hit.to_dict() for hit in hits]

    @server.tool(description=_doc(Vault.store, "Remember something durable (a fact, preference, decision, mistake). "
                                  "Use `supersedes` with the REF of an older memory this one corrects."),
                 annotations=WRITE)
    async def store(category: str, key: str, content: str, priority: str | None = None, tags: list[str] | None = None,
              confidence: float | None = None, expires: str | None = None, supersedes: str | None = None) -> dict[str, Any]:
        options: dict[str, Any] = {"priority": priority, "tags": tags, "confidence": confidence, "supersedes": supersedes}
        if expires is not None:
            options["expires"] = expires
        result = await call(vault.store, category, key, content, **options)
        return result.memory.to_dict() | {
            "created": result.created, "changed": result.changed, "commit": result.commit,
            "superseded": result.superseded.ref if result.superseded else None,
        }

    @server.tool(description=_doc(Vault.get, "Read one memory in full by REF (an id, category/key, or key)."),
                 annotations=READ)
    async def show(ref: str) -> dict[str, Any]:
        return (await call(vault.get, ref)).to_dict()

    @server.tool(name="list", description=_doc(Vault.list, "List memories by category, tags or priority."),
                 annotations=READ)
    async def list_(category: str | None = None, tags: list[str] | None = None, priority: str | None = None,
              unverified: bool = False) -> list[dict[str, Any]]:
        memories = await call(vault.list, category=category, tags=tags, priority=priority, unverified=unverified)
        return [m.to_dict() for m in memories]

    @server.tool(description=_doc(Vault.forget, "Remove a memory that is wrong or no longer wanted (git keeps it). "
                                  "Prefer `store` with `supersedes` when correcting; a memory a person verified: ask the user."),
                 annotations=DELETE)
    async def forget(ref: str) -> dict[str, Any]:
        return (await call(vault.forget, ref)).to_dict()

    @server.tool(description=_doc(Vault.expiring, "Memories that expire soon (to renew or let go)."), annotations=READ)
    async def expiring(within: str = "7d") -> list[dict[str, Any]]:
        return [m.to_dict() for m in await call(vault.expiring, within)]

    @server.tool(description=_doc(Vault.tags, "Every tag in use, with counts (to reuse tags when storing)."),
                 annotations=READ)
    async def tags() -> list[dict[str, Any]]:
        return [{"tag": tag, "count": count} for tag, count in await call(vault.tags)]

    return server


def serve(path: str | None, mind: str | None, watch: bool = True) -> None:
    """Run the stdio MCP server for one mind until the client disconnects.

    A watcher keeps the index warm, unless another one (`memfile watch`) already does.
    """
    try:
        vault = Vault.open(path, mind, source="agent", watch=watch)
    except Conflict:
        vault = Vault.open(path, mind, source="agent")
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memfile")  # one thread owns the Vault's files
    try:
        build_server(vault, worker).run("stdio")
    finally:
        worker.submit(vault.close).result()
        worker.shutdown()
