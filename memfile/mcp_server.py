"""The MCP face: a stdio Model Context Protocol server over one mind, for LLM agents.

Built on the official `mcp` SDK (the optional extra `memfile[mcp]`). The
server opens the vault as an agent (`source: agent`: everything it stores is
unverified, and the library's agent rules apply) and bound to one mind: every
tool goes through `Vault`, which refuses REFs that leave the mind. A watcher
keeps the index in line with the files in process, so search and recall skip the
stat check; between calls the server warms the index (`IdleWarmer`).
Errors come back as tool errors that say what to do instead; the server
itself never stops on a bad call.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
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

#: Seconds of one warm step between tool calls (a call that comes in stops it sooner).
WARM_STEP = 0.05
#: Seconds after the warm work was found done before it is looked for again.
WARM_AGAIN = 1.0

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


def _doc(method: Any, when: str) -> str:
    """A tool's description: when to use it, then the Vault method's own docstring."""
    return f"{when}\n\n{inspect.getdoc(method) or ''}"


class IdleWarmer:
    """Warms the vault's index (`Vault.warm`) on the worker thread whenever no tool call waits.

    It starts after each call; a call that comes in meanwhile stops it at its
    next pause (about 0.4 ms), and the warm work gives the event loop the GIL at
    every pause, so a call waits well under a millisecond for it.
    """

    def __init__(self, vault: Vault, worker: ThreadPoolExecutor) -> None:
        self.vault, self.worker = vault, worker
        self.waiting = 0  # tool calls received and not answered yet
        self._task: asyncio.Task[None] | None = None
        self._done_at = -WARM_AGAIN  # when the last warm work found nothing left to do

    def wake(self) -> None:
        """After a call: warm while idle, unless the work was found done lately (a change to the
        index, which makes it start over, is looked for again after `WARM_AGAIN` seconds)."""
        if (self._task is None or self._task.done()) and time.monotonic() - self._done_at >= WARM_AGAIN:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def _stop(self) -> bool:
        time.sleep(0)  # lets the event loop's thread take the GIL if a call came in
        return self.waiting > 0

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.waiting:
            try:
                more = await loop.run_in_executor(self.worker, self.vault.warm, WARM_STEP, self._stop)
            except Exception:  # noqa: BLE001 - warming is an extra; the next search shows any real problem
                more = False
            if not more:
                self._done_at = time.monotonic()
                return


def build_server(vault: Vault, worker: ThreadPoolExecutor) -> MCPServer:
    """The MCP server of one opened vault (one mind); every Vault call runs in `worker`, a single thread."""
    server = MCPServer("memfile", instructions=INSTRUCTIONS)
    warmer = IdleWarmer(vault, worker)

    def run(method: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except MemfileError as exc:
            raise ToolError(f"{exc} (memfile error {type(exc).__name__}, exit code {exc.exit_code})") from None
        except Exception as exc:  # noqa: BLE001 - a tool call must never take the server down
            raise ToolError(f"memfile failed unexpectedly: {type(exc).__name__}: {exc}") from None

    async def call(method: Any, *args: Any, **kwargs: Any) -> Any:
        warmer.waiting += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(worker, functools.partial(run, method, *args, **kwargs))
        finally:
            warmer.waiting -= 1
            warmer.wake()

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
