"""The HTTP API of `memfile serve`: Synapse's memory endpoints over every mind of one vault (and /console).

`build_app` makes the Starlette application. Each endpoint reads and checks its input (query
parameters and JSON bodies, refused by name when unknown or of the wrong type), then makes one
call into the vault through `Minds.call`, which runs it on the one worker thread that owns every
Vault, as the request's `Caller` (its mind, `agent` or `user`, its key's label); the event loop
only receives and answers. Memories are answered as `Memory.to_dict()` with `mind` named
`mind_id`, Synapse's name. The endpoints that Synapse's seeds do not list are marked
`x-memfile-extension` in the OpenAPI document (`memfile.server.openapi`).

`GET /memory/export` and `POST /memory/import` follow `memfile export` and `memfile import`: a Mind
Key reaches only its own mind, as an agent. The export is written on the worker thread into a
spooled temporary file (kept in memory up to `EXPORT_SPOOL_BYTES`, on disk beyond), which the
response then streams from a thread of Starlette's pool: no Vault call is made from the event loop,
and a large export does not sit in memory. Both are logged on the server's stderr with the key's label.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.body_limit import RequestBodyLimitMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from ..console import Console, ConsoleMount
from ..errors import Face, InvalidInput, Notice, Refused, told
from ..model import Memory, Source, StoreResult, parse_category
from .auth import CALLER, IMPORT_PATH, MAX_BODY_BYTES, MAX_IMPORT_BODY_BYTES, Authenticate, Guard, TrustedHosts
from .errors import EXCEPTION_HANDLERS
from .mcp_mount import McpMount
from .openapi import document
from .params import FIELD_TYPES, REQUIRED, flag, json_body, parameters, path_ref, query_only, whole_number
from .transfer import (
    EXPORT_FORMATS,
    acting,
    export_file,
    export_filename,
    file_chunks,
    import_summary,
    log,
    transfer_named,
)

if TYPE_CHECKING:
    from ..keys import KeyStore
    from ..vault import Vault
    from ..worker import Caller, Minds

T = TypeVar("T")
Handler = Callable[[Request], Awaitable[Response]]

#: The query parameters of a recall (GET /memory/recall and GET /memory).
RECALL_PARAMETERS = ("q", "budget", "limit", "format", "include_superseded")
#: The header each notice of a search rides in (memories not all embedded yet for search by meaning, a hit
#: holding a secret a hand edit put there), one header a notice.
NOTICE_HEADER = "Memfile-Notice"
#: The query parameters of GET /memory/export (`memfile export`'s options).
EXPORT_PARAMETERS = ("format", "raw", "all_minds")
#: Each export format, with its media type and file extension.
#: The query parameters of POST /memory/import (`memfile import`'s options; the body is the file, so
#: `--include-dreams`, which reads DREAMS.md beside an OpenClaw folder's MEMORY.md, has no place here).
IMPORT_PARAMETERS = (
    "from",
    "on_conflict",
    "dry_run",
    "from_mind",
    "split",
    "category",
    "max_priority",
    "source",
    "allow_secret",
)
SEARCH_PARAMETERS = (
    "q",
    "tag",
    "category",
    "priority",
    "source",
    "unverified",
    "include_expired",
    "include_superseded",
    "limit",
)


def memory_json(memory: Memory) -> dict[str, Any]:
    """A memory in Synapse's names: `Memory.to_dict()` with `mind` as `mind_id` (in the same place)."""
    return _renamed(memory.to_dict())


def _renamed(data: dict[str, Any]) -> dict[str, Any]:
    return {("mind_id" if name == "mind" else name): value for name, value in data.items()}


def stored_json(result: StoreResult) -> dict[str, Any]:
    """What a write answers: the memory as now on disk, and what the write did."""
    return memory_json(result.memory) | {
        "created": result.created,
        "changed": result.changed,
        "commit": result.commit,
        "superseded": memory_json(result.superseded) if result.superseded else None,
        "notices": [told(notice, Face.HTTP) for notice in result.notices],
    }


def store_options(data: dict[str, Any]) -> dict[str, Any]:
    """`Vault.store`'s keyword arguments from a body: `expires_at` is its `expires` (null: never)."""
    options: dict[str, Any] = {
        name: data[name]
        for name in ("priority", "tags", "confidence", "source", "supersedes", "allow_secret")
        if name in data
    }
    if "expires_at" in data:
        options["expires"] = "never" if data["expires_at"] is None else data["expires_at"]
    return options


def _named_expires_at(call: Callable[[], T]) -> T:
    """`call()`, with the library's `expires` field named `expires_at` in its error (the body's name)."""
    try:
        return call()
    except InvalidInput as exc:
        raise _as_expires_at(exc) from None


async def _named_expires_at_async(call: Awaitable[T]) -> T:
    """`_named_expires_at` for a call that is awaited."""
    try:
        return await call
    except InvalidInput as exc:
        raise _as_expires_at(exc) from None


def _as_expires_at(exc: InvalidInput) -> InvalidInput:
    """The error with the body's field name: the library's `expires` is the body's `expires_at`."""
    if exc.field != "expires":
        return exc
    return InvalidInput("expires_at", exc.value, exc.allowed, reason=exc.reason)


# --- the application ----------------------------------------------------------------------------


def build_app(
    minds: Minds,
    keys: KeyStore,
    *,
    allowed_hosts: Iterable[str],
    mcp: bool = True,
) -> Starlette:
    """The HTTP API over every mind of `minds`' vault, with `keys` as its credentials, and the memory
    console at /console (`memfile.console`: its own pages, sessions and headers).

    Args:
        minds: the vault's minds; every Vault call goes through `minds.call` (one worker thread).
        keys: the credentials (`KeyStore.authenticate` of each request's Bearer token).
        allowed_hosts: the host names the Host header may carry (IP addresses are always taken).
        mcp: mount the MCP server at /mcp (when the MCP SDK is installed).
    """
    mount = McpMount(minds) if mcp and McpMount.available() else None

    async def call(request: Request, fn: Callable[[Vault], T]) -> T:
        caller: Caller = request.scope[CALLER]
        return await minds.call(caller, fn)

    async def read(request: Request, fn: Callable[[Vault], T]) -> T:
        """`call` for what only reads: answered even while a store's commit is being made (`Minds.call`).
        Its notices go to the server's log (a secret a read served: the person who runs the server can
        remove it; the answer's shape stays the API's)."""
        caller: Caller = request.scope[CALLER]

        def logged(vault: Vault) -> T:
            answer = fn(vault)
            for notice in vault.notices:  # a secret a read served: the log is no line per request otherwise
                if isinstance(notice, Notice) and notice.hint == "edit_out_secret":
                    log(
                        f"{request.method} {request.url.path} by {acting(caller)} in the mind {caller.mind!r}: {notice}"
                    )
            return answer

        return await minds.call(caller, logged, read=True)

    # --- Synapse's endpoints ---

    async def store(request: Request) -> Response:
        parameters(request, ())
        data = await json_body(request, FIELD_TYPES, REQUIRED)
        arguments = {name: data[name] for name in REQUIRED} | store_options(data)
        # Stores that arrive while one is being committed share the next commit (`Minds.store`).
        result = await _named_expires_at_async(minds.store(request.scope[CALLER], arguments))
        return JSONResponse(stored_json(result), status_code=201 if result.created else 200)

    async def update(request: Request) -> Response:
        parameters(request, ())
        ref = path_ref(request)
        data = await json_body(request, FIELD_TYPES)
        options = store_options(data)

        def put(vault: Vault) -> StoreResult:
            old = vault.get(ref)
            for name, now in (("category", str(old.category)), ("key", old.key)):
                given = data.get(name, now)
                if (str(parse_category(given)) if name == "category" else given) != now:
                    raise InvalidInput(
                        name,
                        given,
                        f"{now!r} (this memory's {name}; a memory's category and key never change: "
                        "POST /memory a new one, with supersedes naming this one)",
                    )
            content = data.get("content", old.content)
            return _named_expires_at(lambda: vault.store(old.category, old.key, content, **options))

        return JSONResponse(stored_json(await call(request, put)))

    async def recall(request: Request) -> Response:
        given = await query_only(request, RECALL_PARAMETERS)
        fmt = given.get("format", "text")
        if fmt not in ("text", "json"):
            raise InvalidInput("format", fmt, "text, json")
        options: dict[str, Any] = {
            "query": given.get("q") or None,
            "include_superseded": flag(given.get("include_superseded"), "include_superseded"),
        }
        limit = whole_number(given.get("limit"), "limit")
        options["limit"] = 10 if limit is None else limit
        budget = whole_number(given.get("budget"), "budget")
        if budget is not None:
            options["budget"] = budget
        if fmt == "json":
            report = await read(request, lambda vault: vault.recall(**options).to_dict())
            report = _renamed(report)
            report["memories"] = [_renamed(item) for item in report["memories"]]
            return JSONResponse(report)
        text = await read(request, lambda vault: vault.recall(**options).encode())
        return Response(text, media_type="text/plain; charset=utf-8")

    async def search(request: Request) -> Response:
        given = await query_only(request, SEARCH_PARAMETERS, repeatable=("tag",))
        if not given.get("q", "").strip():
            raise InvalidInput("q", None, "the words to look for: ?q=WORDS")
        limit = whole_number(given.get("limit"), "limit")

        def work(vault: Vault) -> tuple[list[dict[str, Any]], list[str]]:
            hits = vault.search(
                given["q"],
                tags=given["tag"],
                category=given.get("category") or None,
                priority=given.get("priority") or None,
                source=given.get("source") or None,
                unverified=flag(given.get("unverified"), "unverified"),
                include_expired=flag(given.get("include_expired"), "include_expired"),
                include_superseded=flag(given.get("include_superseded"), "include_superseded"),
                limit=10 if limit is None else limit,
            )
            return [_renamed(hit.to_dict()) for hit in hits], list(vault.notices)

        hits, notices = await read(request, work)
        response = JSONResponse(hits)  # Synapse's answer, a list: a notice rides in a header
        for notice in notices:  # a header is Latin-1: any other character is written as a JSON escape (\u2026)
            response.headers.append(NOTICE_HEADER, json.dumps(told(notice, Face.HTTP))[1:-1])
        return response

    async def by_tag(request: Request) -> Response:
        given = await query_only(request, ("tag", "include_expired"))
        if "tag" not in given:
            raise InvalidInput("tag", None, "a tag: ?tag=NAME")
        include_expired = flag(given.get("include_expired"), "include_expired")
        memories = await read(request, lambda vault: vault.by_tag(given["tag"], include_expired=include_expired))
        return JSONResponse([memory_json(m) for m in memories])

    async def expiring(request: Request) -> Response:
        within = (await query_only(request, ("within",))).get("within", "7d")
        return JSONResponse([memory_json(m) for m in await read(request, lambda vault: vault.expiring(within))])

    async def verify(request: Request) -> Response:
        await query_only(request)
        ref = path_ref(request)
        return JSONResponse(stored_json(await call(request, lambda vault: vault.verify(ref))))

    # --- extensions ---

    async def export(request: Request) -> Response:
        given = await query_only(request, EXPORT_PARAMETERS)
        fmt = given.get("format", "jsonl")
        if fmt not in EXPORT_FORMATS:
            raise InvalidInput("format", fmt, ", ".join(EXPORT_FORMATS))
        raw, all_minds = flag(given.get("raw"), "raw"), flag(given.get("all_minds"), "all_minds")
        if raw and fmt != "jsonl":
            raise InvalidInput(
                "raw", "true", "raw with format=jsonl", reason="Synapse's JSON has no place for file text"
            )
        caller: Caller = request.scope[CALLER]
        if all_minds and caller.source is Source.AGENT:
            raise Refused(
                f"this Mind Key ({caller.key}) exports only the mind {caller.mind!r}; leave out all_minds, "
                "or export every mind with a person's token"
            )
        now = datetime.now(timezone.utc)
        exported = await transfer_named(
            read(request, lambda vault: export_file(vault, all_minds=all_minds, format=fmt, raw=raw))
        )
        scope = "every mind" if all_minds else f"the mind {caller.mind!r}"
        left_out = f"; {exported.unreadable} unreadable files left out (listed in it)" if exported.unreadable else ""
        what = f"{fmt}, raw" if raw else fmt
        log(f"export by {acting(caller)}: {exported.memories} memories of {scope} ({what}){left_out}")
        filename = export_filename(caller, all_minds, fmt, now)
        headers = {"Content-Disposition": f'attachment; filename="{filename}"', "Content-Length": str(exported.size)}
        return StreamingResponse(file_chunks(exported.file), media_type=EXPORT_FORMATS[fmt][0], headers=headers)

    async def import_file(request: Request) -> Response:
        given = parameters(request, IMPORT_PARAMETERS)
        options: dict[str, Any] = {
            "format": given.get("from") or None,
            "on_conflict": given.get("on_conflict", "newer"),
            "dry_run": flag(given.get("dry_run"), "dry_run"),
            "from_mind": given.get("from_mind") or None,
            "split": given.get("split", "sections"),
            "category": given.get("category") or None,
            "max_priority": given.get("max_priority", "high"),
            "source_as": given.get("source") or None,
            "allow_secret": flag(given.get("allow_secret"), "allow_secret"),
        }
        data = await request.body()
        if not data.strip():
            raise InvalidInput(
                "body",
                None,
                "the file to import: memfile's JSONL export, Synapse or LangBot JSON, or an OpenClaw Markdown file",
            )
        caller: Caller = request.scope[CALLER]
        report = await transfer_named(call(request, lambda vault: vault.import_(data, **options).to_dict()))
        report["notices"] = [told(notice, Face.HTTP) for notice in report["notices"]]
        log(f"import by {acting(caller)} into the mind {caller.mind!r}: {import_summary(report)}")
        return JSONResponse(report)

    async def show(request: Request) -> Response:
        await query_only(request)
        ref = path_ref(request)
        return JSONResponse(memory_json(await read(request, lambda vault: vault.get(ref))))

    async def forget(request: Request) -> Response:
        await query_only(request)
        ref = path_ref(request)
        return JSONResponse(memory_json(await call(request, lambda vault: vault.forget(ref))))

    async def history(request: Request) -> Response:
        await query_only(request)
        ref = path_ref(request)
        versions = await read(request, lambda vault: [v.to_dict() for v in vault.history(ref)])
        for version in versions:
            if version.get("memory"):
                version["memory"] = _renamed(version["memory"])
        return JSONResponse(versions)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    spec = document(mcp=mount is not None)

    async def openapi(request: Request) -> Response:
        return JSONResponse(spec)

    routes: list[BaseRoute] = [
        endpoint("/health", GET=health),
        endpoint("/openapi.json", GET=openapi),
        endpoint("/memory", GET=recall, POST=store),
        endpoint("/memory/recall", GET=recall),
        endpoint("/memory/search", GET=search),
        endpoint("/memory/by-tag", GET=by_tag),
        endpoint("/memory/expiring", GET=expiring),
        endpoint("/memory/export", GET=export),  # before /memory/{id}, which would take `export` for an id
        endpoint(IMPORT_PATH, max_body_size=MAX_IMPORT_BODY_BYTES, POST=import_file),  # a whole export file
        endpoint("/memory/{id}", GET=show, PUT=update, DELETE=forget),
        endpoint("/memory/{id}/verify", POST=verify),
        endpoint("/memory/{id}/history", GET=history),
    ]
    if mount is not None:
        routes.append(mount.route())

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if mount is not None:
                await mount.stop()

    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(TrustedHosts, allowed_hosts=allowed_hosts),
            Middleware(Guard),
            Middleware(RequestBodyLimitMiddleware, max_body_size=MAX_BODY_BYTES),
            Middleware(ConsoleMount, console=Console(minds, keys).app()),  # /console: no Bearer check there
            Middleware(Authenticate, minds=minds, keys=keys),
        ],
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False  # `/memory/` is no endpoint: a 404, not a redirect to build from Host
    return app


def endpoint(path: str, max_body_size: int | None = None, **handlers: Handler) -> Route:
    """One path with a handler per method (so a 405 lists every method the path has); `max_body_size`
    replaces the server's body limit for it."""

    async def dispatch(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        return await handlers[method](request)

    return Route(path, dispatch, methods=list(handlers), name=path, max_body_size=max_body_size)
