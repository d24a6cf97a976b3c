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

import io
import json
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from tempfile import SpooledTemporaryFile
from typing import IO, TYPE_CHECKING, Any, NamedTuple, TypeVar

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.body_limit import RequestBodyLimitMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from ..errors import Face, InvalidInput, Notice, Refused, told
from ..model import REF_RULE, Memory, Source, StoreResult, parse_category
from .auth import CALLER, IMPORT_PATH, MAX_BODY_BYTES, MAX_IMPORT_BODY_BYTES, MIND_PARAMETER, Authenticate, Guard
from .console import Console
from .console_auth import ConsoleMount
from .errors import EXCEPTION_HANDLERS
from .mcp_mount import McpMount
from .openapi import document

if TYPE_CHECKING:
    from ..keys import KeyStore
    from ..vault import Vault
    from ..worker import Caller, Minds

T = TypeVar("T")
Handler = Callable[[Request], Awaitable[Response]]

#: The JSON types each body field of POST /memory and PUT /memory/{id} may have.
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "category": (str,),
    "key": (str,),
    "content": (str,),
    "tags": (list, str),
    "priority": (str,),
    "confidence": (int, float),
    "expires_at": (str, type(None)),
    "source": (str,),
    "supersedes": (str,),
    "allow_secret": (bool,),  # a person stores what looks like a secret all the same (a Mind Key: 403)
}
TYPE_NAMES = {
    str: "a string",
    list: "a list of strings",
    int: "a number",
    float: "a number",
    type(None): "null",
    bool: "true or false",
}
#: The fields of POST /memory that must be there.
REQUIRED = ("category", "key", "content")
#: Why a field a client may try is not one, when there is more to say than its name.
NOT_A_FIELD = {
    "verified": "a person verifies with POST /memory/{id}/verify",
    "mind_id": "the credential chooses the mind (a person's token: ?mind=NAME)",
    "mind": "the credential chooses the mind (a person's token: ?mind=NAME)",
    "id": "the id is chosen by memfile; update a memory with PUT /memory/{id}",
}
#: The query parameters of a recall (GET /memory/recall and GET /memory).
RECALL_PARAMETERS = ("q", "budget", "limit", "format", "include_superseded")
#: The header each notice of a search rides in (memories not all embedded yet for search by meaning, a hit
#: holding a secret a hand edit put there), one header a notice.
NOTICE_HEADER = "Memfile-Notice"
#: The query parameters of GET /memory/export (`memfile export`'s options).
EXPORT_PARAMETERS = ("format", "raw", "all_minds")
#: Each export format, with its media type and file extension.
EXPORT_FORMATS = {"jsonl": ("application/x-ndjson", "jsonl"), "json": ("application/json", "json")}
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
#: The library's names for the options of an export or import (the command line's) -> this API's names.
TRANSFER_NAMES = {
    "--format": "format",
    "--raw": "raw",
    "--from": "from",
    "--on-conflict": "on_conflict",
    "--split": "split",
    "--max-priority": "max_priority",
    "--source": "source",
    "--from-mind": "from_mind",
    "FILE": "body",
}
#: The values of a true/false query parameter (any case; the parameter alone is true).
FLAG_WORDS = {"true": True, "false": False}
#: What a REF in a path may not hold: NUL and the other control characters (no key or id has one).
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: Bytes of an export kept in memory before its spooled file moves to disk.
EXPORT_SPOOL_BYTES = 8 * 1024 * 1024
#: Bytes of an export handed to the client at a time.
EXPORT_CHUNK_BYTES = 256 * 1024
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


# --- reading a request ------------------------------------------------------------------------


def parameters(request: Request, allowed: Iterable[str], repeatable: Iterable[str] = ()) -> dict[str, Any]:
    """The query parameters of `request`, each once (a list for the `repeatable` ones); an unknown or
    repeated one is refused by name (`mind` is the authentication's, always allowed)."""
    allowed, repeatable = tuple(allowed), tuple(repeatable)
    query = request.query_params
    unknown = sorted({name for name in query if name not in allowed and name != MIND_PARAMETER})
    if unknown:
        raise InvalidInput(
            "query parameter",
            ", ".join(unknown),
            ", ".join((*allowed, MIND_PARAMETER)),
            reason=f"not a parameter of {request.method} {_template(request)}",
        )
    found: dict[str, Any] = {}
    for name in allowed:
        values = query.getlist(name)
        if name in repeatable:
            found[name] = values
        elif len(values) > 1:
            raise InvalidInput(name, ", ".join(values), f"one ?{name}=", reason="it is given more than once")
        elif values:
            found[name] = values[0]
    return found


def _template(request: Request) -> str:
    route = request.scope.get("route")
    return getattr(route, "path", request.url.path)


def whole_number(value: str | None, name: str) -> int | None:
    """A query parameter that must be a whole number (None when absent)."""
    if value is None:
        return None
    text = value.strip()
    if not text.lstrip("-").isdigit() or len(text) > 12:
        raise InvalidInput(name, value, "a whole number")
    return int(text)


def flag(value: str | None, name: str) -> bool:
    """A true/false query parameter (absent: false; `?include_expired` alone: true), `true` or `false` in any
    case and nothing else: what the error message and the OpenAPI document (a boolean) say.

    Raises:
        InvalidInput: another value (yes, 1, on...).
    """
    if value is None:
        return False
    if value == "":
        return True
    word = value.strip().lower()
    if word not in FLAG_WORDS:
        raise InvalidInput(name, value, ", ".join(FLAG_WORDS))
    return FLAG_WORDS[word]


async def json_body(request: Request, allowed: Iterable[str], required: Iterable[str] = ()) -> dict[str, Any]:
    """The request's JSON object, every field of it one of `allowed` with its JSON type (FIELD_TYPES).

    Raises:
        InvalidInput: no body, not JSON, not an object, a field that is not allowed (all of them named,
            with the allowed ones), a required field missing, or a field of the wrong type.
    """
    allowed = tuple(allowed)
    raw = await request.body()
    where = f"{request.method} {_template(request)}"
    shape = f"a JSON object with the fields {', '.join(allowed)}"
    if not raw.strip():
        raise InvalidInput("body", None, shape)
    try:
        data = json.loads(raw)
    except RecursionError:
        raise InvalidInput("body", f"{len(raw)} bytes", shape, reason="it is nested too deep") from None
    except ValueError as exc:  # UnicodeDecodeError included
        raise InvalidInput("body", f"{len(raw)} bytes", shape, reason=f"it is not JSON: {exc}") from None
    if not isinstance(data, dict):
        kind = _json_type(data)
        raise InvalidInput("body", kind, shape, reason=f"it must be a JSON object, not {kind}")
    unknown = [name for name in data if name not in allowed]
    if unknown:
        hints = "; ".join(f"{name}: {NOT_A_FIELD[name]}" for name in unknown if name in NOT_A_FIELD)
        raise InvalidInput(
            "field" if len(unknown) == 1 else "fields",
            ", ".join(name[:100] for name in unknown),
            ", ".join(allowed),
            reason=f"not a field of {where}" + (f"; {hints}" if hints else ""),
        )
    for name in required:
        if name not in data:
            raise InvalidInput(name, None, f"{name} in the body of {where}")
    for name, value in data.items():
        types = FIELD_TYPES[name]
        if isinstance(value, bool) is not (bool in types) or not isinstance(value, types):
            wanted = " or ".join(dict.fromkeys(TYPE_NAMES[t] for t in types))
            raise InvalidInput(name, value, wanted, reason=f"it is {_json_type(value)}")
        if isinstance(value, list) and not all(isinstance(item, str) for item in value):
            raise InvalidInput(name, value, "a list of strings", reason="an item is not a string")
    return data


async def query_only(request: Request, allowed: Iterable[str] = (), repeatable: Iterable[str] = ()) -> dict[str, Any]:
    """`parameters` of an endpoint that takes no body, after checking that none came: an empty body or `{}`
    is fine, and a body with fields is refused naming them, before anything is done.

    Raises:
        InvalidInput: an unknown or repeated query parameter, or a body (its fields named, when it is a JSON object).
    """
    given = parameters(request, allowed, repeatable)
    raw = await request.body()
    if not raw.strip():
        return given
    where = f"{request.method} {_template(request)}"
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        data = raw
    if isinstance(data, dict):
        if not data:
            return given
        names = list(data)
        raise InvalidInput(
            "field" if len(names) == 1 else "fields",
            ", ".join(names),
            "no body (the options of an endpoint are query parameters)",
            reason=f"{where} takes no body; nothing was done",
        )
    raise InvalidInput(
        "body", f"{len(raw)} bytes", "no body (or an empty one)", reason=f"{where} takes no body; nothing was done"
    )


def path_ref(request: Request) -> str:
    """The `{id}` of the request's path, checked by `checked_ref`."""
    return checked_ref(request.path_params["id"])


def checked_ref(ref: str) -> str:
    """A memory's id or REF from a path (the Vault checks the rest; the console's memory pages too).

    Raises:
        InvalidInput: it holds NUL or another control character (%00, %0a...), which no id or key has.
    """
    if CONTROL_CHARACTERS.search(ref):
        raise InvalidInput("REF", ref, REF_RULE, reason="it holds a NUL or another control character")
    return ref


def _json_type(value: Any) -> str:
    names = {bool: "true or false", int: "a number", float: "a number", str: "a string", list: "a list"}
    return "null" if value is None else names.get(type(value), "an object")


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


# --- export and import ----------------------------------------------------------------------------


class Exported(NamedTuple):
    """An export made on the worker thread, for the response to stream."""

    file: IO[bytes]  # rewound; the response closes it
    size: int  # bytes
    memories: int  # how many memories it holds
    unreadable: int  # files left out because they could not be read (listed in the export)


def export_file(vault: Vault, *, all_minds: bool, format: str, raw: bool) -> Exported:
    """On the worker thread: `vault`'s export written into a spooled temporary file (in memory up to
    EXPORT_SPOOL_BYTES, then on disk), rewound for reading."""
    spool: IO[bytes] = SpooledTemporaryFile(max_size=EXPORT_SPOOL_BYTES)  # noqa: SIM115 - the response closes it
    try:
        text = io.TextIOWrapper(spool, encoding="utf-8", newline="")
        report = vault.export(text, all_minds=all_minds, format=format, raw=raw)
        text.flush()
        text.detach()  # the spool stays open for the response
        size = spool.tell()
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    return Exported(spool, size, report.count, len(report.unreadable))


async def _transfer_named(call: Awaitable[T]) -> T:
    """`await call`, with the library's names of export and import options (the command line's) in its
    error given as this API's query parameters (`--on-conflict` is `on_conflict`, the file is the body),
    also where its reason or allowed values name one (`name it with --from X` -> `?from=X`)."""
    try:
        return await call
    except InvalidInput as exc:
        if type(exc) is not InvalidInput:  # a subclass says its message its own way
            raise
        field = TRANSFER_NAMES.get(exc.field, exc.field)
        allowed, reason = _as_parameters(exc.allowed), _as_parameters(exc.reason)
        if (field, allowed, reason) == (exc.field, exc.allowed, exc.reason):
            raise
        raise InvalidInput(field, exc.value, allowed, reason=reason) from None


def _as_parameters(text: str) -> str:
    """`text` with the command line's options of an export or import as this API's query parameters: a
    choice (`--from A|B`, `--from=A`) as `?from=A|B`, and an option alone (`--raw`) by its name (`raw`)."""

    def parameter(match: re.Match[str]) -> str:
        name = TRANSFER_NAMES.get(match.group(1))
        if name is None:
            return match.group(0)
        value = match.group(2) or match.group(3)
        return f"?{name}={value}" if value else name

    return re.sub(r"(--[a-z][a-z-]*)(?:=(\S+)| ([\w-]+(?:\|[\w-]+)+))?", parameter, text)


def file_chunks(file: IO[bytes]) -> Iterator[bytes]:
    """The file's bytes in chunks, then the file closed (Starlette runs each step in its thread pool)."""
    with file:
        while chunk := file.read(EXPORT_CHUNK_BYTES):
            yield chunk


def export_filename(caller: Caller, all_minds: bool, format: str, now: datetime) -> str:
    """The name a client saves an export as: memfile-export-MIND-YYYYMMDD.jsonl (`all-minds` for every mind)."""
    scope = "all-minds" if all_minds else caller.mind
    return f"memfile-export-{scope}-{now:%Y%m%d}.{EXPORT_FORMATS[format][1]}"


def import_summary(report: dict[str, Any]) -> str:
    """An ImportReport's counts in one line, for the server's log."""

    counts = [f"{len(report[name])} {name}" for name in ("created", "updated", "skipped", "conflicts")]
    counts.insert(2, f"{report['unchanged']} unchanged")
    done = "a dry run, nothing written" if report["dry_run"] else f"commit {report['commit'] or 'none'}"
    return f"{', '.join(counts)} ({report['format']}; {done})"


def log(message: str) -> None:
    """A line on the server's stderr (`memfile serve: ...`), where its other messages go."""
    print(f"memfile serve: {message}", file=sys.stderr, flush=True)


def acting(caller: Caller) -> str:
    """Who a logged request acted as: its key's label and kind."""
    kind = "Mind Key" if caller.source is Source.AGENT else "person's token"
    return f"{kind} {caller.key!r}"


# --- the application ----------------------------------------------------------------------------


def build_app(
    minds: Minds,
    keys: KeyStore,
    *,
    allowed_hosts: Iterable[str],
    mcp: bool = True,
) -> Starlette:
    """The HTTP API over every mind of `minds`' vault, with `keys` as its credentials, and the memory
    console at /console (`memfile.server.console`: its own pages, sessions and headers).

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
        exported = await _transfer_named(
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
        report = await _transfer_named(call(request, lambda vault: vault.import_(data, **options).to_dict()))
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
            Middleware(Guard, allowed_hosts=allowed_hosts),
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
