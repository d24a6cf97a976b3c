"""The HTTP API of `memfile serve`: Synapse's memory endpoints over every mind of one vault (and /console).

`ENDPOINTS` is the route table (one `endpoint.Endpoint` a method on a path), from which `build_app`
makes the Starlette routes and `openapi.document` the OpenAPI document, so the two cannot differ. Each
handler makes one call into the vault through `Minds.call` (the one worker thread), as the request's
`Caller`. Memories are answered as `Memory.to_dict()` with `mind` named `mind_id`, Synapse's name.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.body_limit import RequestBodyLimitMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ..console import Console, ConsoleMount
from ..errors import Face, InvalidInput, Notice, Refused, told
from ..model import Category, Memory, Priority, Source, StoreResult, parse_category
from .auth import CALLER, IMPORT_PATH, MAX_BODY_BYTES, MAX_IMPORT_BODY_BYTES, Authenticate, Guard, TrustedHosts
from .endpoint import Endpoint, Param
from .errors import EXCEPTION_HANDLERS
from .mcp_mount import McpMount
from .openapi import (
    ACCEPTANCE,
    BOOL,
    CAPTURE,
    IMPORT_FORMATS,
    LIMIT,
    MEMORY_CHANGE,
    NEW_MEMORY,
    ON_CONFLICT,
    PURGE,
    SPLITS,
    STRING,
    document,
    ok,
    ref,
)
from .transfer import (
    EXPORT_FORMATS,
    acting,
    export_file,
    export_response,
    import_summary,
    log,
    transfer_named,
)

if TYPE_CHECKING:
    from ..keys import KeyStore
    from ..vault import Vault
    from ..worker import Caller, Minds

T = TypeVar("T")

#: The header each notice of a search rides in (memories not all embedded yet for search by meaning, a hit
#: holding a secret a hand edit put there), one header a notice.
NOTICE_HEADER = "Memfile-Notice"


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


@contextmanager
def _expires_at_named() -> Iterator[None]:
    """The library's `expires` field named `expires_at` in an error raised inside (the body's name)."""
    try:
        yield
    except InvalidInput as exc:
        if exc.field != "expires":
            raise
        raise InvalidInput("expires_at", exc.value, exc.allowed, reason=exc.reason) from None


async def call(request: Request, fn: Callable[[Vault], T]) -> T:
    """`fn(vault)` on the worker thread, in the request's mind, as its caller."""
    minds: Minds = request.app.state.minds
    return await minds.call(request.scope[CALLER], fn)


async def read(request: Request, fn: Callable[[Vault], T]) -> T:
    """`call` for what only reads: answered even while a store's commit is being made (`Minds.call`).
    Its notices go to the server's log (a secret a read served: the person who runs the server can
    remove it; the answer's shape stays the API's)."""
    caller: Caller = request.scope[CALLER]
    minds: Minds = request.app.state.minds

    def logged(vault: Vault) -> T:
        answer = fn(vault)
        for notice in vault.notices:  # a secret a read served: the log is no line per request otherwise
            if isinstance(notice, Notice) and notice.hint == "edit_out_secret":
                log(f"{request.method} {request.url.path} by {acting(caller)} in the mind {caller.mind!r}: {notice}")
        return answer

    return await minds.call(caller, logged, read=True)


async def store(request: Request, given: dict[str, Any]) -> Response:
    data = given["body"]
    arguments = {name: data[name] for name in NEW_MEMORY.schema["required"]} | store_options(data)
    # Stores that arrive while one is being committed share the next commit (`Minds.store`).
    minds: Minds = request.app.state.minds
    with _expires_at_named():
        result = await minds.store(request.scope[CALLER], arguments)
    return JSONResponse(stored_json(result), status_code=201 if result.created else 200)


async def update(request: Request, given: dict[str, Any]) -> Response:
    data = given["body"]
    options = store_options(data)

    def put(vault: Vault) -> StoreResult:
        old = vault.get(given["id"])
        for name, now in (("category", str(old.category)), ("key", old.key)):
            asked = data.get(name, now)
            if (str(parse_category(asked)) if name == "category" else asked) != now:
                raise InvalidInput(
                    name,
                    asked,
                    f"{now!r} (this memory's {name}; a memory's category and key never change: "
                    "POST /memory a new one, with supersedes naming this one)",
                )
        content = data.get("content", old.content)
        with _expires_at_named():
            return vault.store(old.category, old.key, content, **options)

    return JSONResponse(stored_json(await call(request, put)))


async def recall(request: Request, given: dict[str, Any]) -> Response:
    fmt = "text" if given["format"] is None else given["format"]
    if fmt not in ("text", "json"):
        raise InvalidInput("format", fmt, "text, json")
    options: dict[str, Any] = {
        "query": given["q"] or None,
        "include_superseded": given["include_superseded"],
        "include_proposed": given["include_proposed"],  # a Mind Key's is ignored: an agent sees no proposal
        "limit": given["limit"],
    }
    if given["budget"] is not None:
        options["budget"] = given["budget"]
    if given["at"]:
        options["at"] = _as_of(request, given["at"], "recall")
    if fmt == "json":
        report = _renamed(await read(request, lambda vault: vault.recall(**options).to_dict()))
        report["memories"] = [_renamed(item) for item in report["memories"]]
        return JSONResponse(report)
    text = await read(request, lambda vault: vault.recall(**options).encode())
    return Response(text, media_type="text/plain; charset=utf-8")


def _as_of(request: Request, at: str, verb: str) -> str:
    """The `at` of a recall or search (`verb`), for a person's token only: an agent reads its mind as it is now,
    so what a person has forgotten or corrected since never comes back into an agent's context."""
    caller: Caller = request.scope[CALLER]
    if caller.source is Source.AGENT:
        raise Refused(
            f"this Mind Key ({caller.key}) {verb}s the mind as it is now; leave out at, "
            f"or {verb} as of a date with a person's token"
        )
    return at


async def search(request: Request, given: dict[str, Any]) -> Response:
    if not (given["q"] or "").strip():
        raise InvalidInput("q", None, "the words to look for: ?q=WORDS")
    at = _as_of(request, given["at"], "search") if given["at"] else None

    def work(vault: Vault) -> tuple[list[dict[str, Any]], list[str]]:
        hits = vault.search(
            given["q"],
            tags=given["tag"],
            category=given["category"] or None,
            priority=given["priority"] or None,
            source=given["source"] or None,
            unverified=given["unverified"],
            include_expired=given["include_expired"],
            include_superseded=given["include_superseded"],
            include_proposed=given["include_proposed"],  # a Mind Key's is ignored: an agent sees no proposal
            limit=given["limit"],
            at=at,
        )
        return [_renamed(hit.to_dict()) for hit in hits], list(vault.notices)

    hits, notices = await read(request, work)
    response = JSONResponse(hits)  # Synapse's answer, a list: a notice rides in a header
    for notice in notices:  # a header is Latin-1: any other character is written as a JSON escape (\u2026)
        response.headers.append(NOTICE_HEADER, json.dumps(told(notice, Face.HTTP))[1:-1])
    return response


async def by_tag(request: Request, given: dict[str, Any]) -> Response:
    if given["tag"] is None:
        raise InvalidInput("tag", None, "a tag: ?tag=NAME")
    memories = await read(request, lambda vault: vault.by_tag(given["tag"], include_expired=given["include_expired"]))
    return JSONResponse([memory_json(m) for m in memories])


async def expiring(request: Request, given: dict[str, Any]) -> Response:
    return JSONResponse([memory_json(m) for m in await read(request, lambda vault: vault.expiring(given["within"]))])


async def verify(request: Request, given: dict[str, Any]) -> Response:
    return JSONResponse(stored_json(await call(request, lambda vault: vault.verify(given["id"]))))


async def proposals(request: Request, given: dict[str, Any]) -> Response:
    caller: Caller = request.scope[CALLER]
    if caller.source is Source.AGENT:  # `Vault.proposals` would answer an agent an empty list
        raise Refused(
            f"this Mind Key ({caller.key}) cannot see captured memories: they wait for a person's review "
            "(a person's token, or memfile review)"
        )
    return JSONResponse([memory_json(m) for m in await read(request, lambda vault: vault.proposals())])


async def accept(request: Request, given: dict[str, Any]) -> Response:
    body = given["body"]
    changes = store_options(body) | ({"content": body["content"]} if "content" in body else {})
    with _expires_at_named():
        memory = await call(request, lambda vault: vault.accept(given["id"], **changes))
    return JSONResponse(memory_json(memory))


async def capture(request: Request, given: dict[str, Any]) -> Response:
    """The model is asked off the worker thread (it may take `[capture] timeout`); the Vault decides on it."""
    from starlette.concurrency import run_in_threadpool

    from ..extractor import ChatEndpoint

    body = given["body"]
    messages, session, review = body.get("messages"), body.get("session"), body.get("review")
    minds: Minds = request.app.state.minds
    answer = await run_in_threadpool(ChatEndpoint.from_config(minds.config).ask, messages)
    report = await call(
        request,
        lambda vault: vault.capture(
            messages, lambda _s, _u: answer, session, review=review, dry_run=bool(body.get("dry_run"))
        ),
    )
    return JSONResponse(report.to_dict())


async def reject(request: Request, given: dict[str, Any]) -> Response:
    return JSONResponse(memory_json(await call(request, lambda vault: vault.reject(given["id"]))))


async def export(request: Request, given: dict[str, Any]) -> Response:
    fmt, raw, all_minds = given["format"], given["raw"], given["all_minds"]
    if fmt not in EXPORT_FORMATS:
        raise InvalidInput("format", fmt, ", ".join(EXPORT_FORMATS))
    if raw and fmt != "jsonl":
        raise InvalidInput("raw", "true", "raw with format=jsonl", reason="Synapse's JSON has no place for file text")
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
    return export_response(exported, "all-minds" if all_minds else caller.mind, fmt, now)


async def import_file(request: Request, given: dict[str, Any]) -> Response:
    options: dict[str, Any] = {
        "format": given["from"] or None,
        "on_conflict": given["on_conflict"],
        "dry_run": given["dry_run"],
        "from_mind": given["from_mind"] or None,
        "split": given["split"],
        "category": given["category"] or None,
        "max_priority": given["max_priority"],
        "source_as": given["source"] or None,
        "allow_secret": given["allow_secret"],
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


async def show(request: Request, given: dict[str, Any]) -> Response:
    return JSONResponse(_renamed(await read(request, lambda vault: vault.linked(given["id"]).to_dict())))


async def forget(request: Request, given: dict[str, Any]) -> Response:
    return JSONResponse(memory_json(await call(request, lambda vault: vault.forget(given["id"]))))


async def forget_many(request: Request, given: dict[str, Any]) -> Response:
    filters = {param.name: given[param.name] for param in FORGET_FILTERS}
    if not any(filters.values()):
        raise InvalidInput("filter", None, "at least one of " + ", ".join(f"?{p.name}=" for p in FORGET_FILTERS))
    report = await call(request, lambda vault: vault.forget_many(**filters, dry_run=given["dry_run"]))
    return JSONResponse(
        report.to_dict()
        | {
            "forgotten": [memory_json(m) for m in report.forgotten],
            "left_out": [memory_json(m) for m in report.left_out],
        }
    )


async def purge(request: Request, given: dict[str, Any]) -> Response:
    body = given["body"]
    text, dry_run = body.get("text"), bool(body.get("dry_run"))
    report = await call(request, lambda vault: vault.purge(given["id"], text=text, dry_run=dry_run))
    if not dry_run:
        log(f"purge by {acting(request.scope[CALLER])}: {report.ref} of the mind {report.mind!r}")
    return JSONResponse(report.to_dict())


async def history(request: Request, given: dict[str, Any]) -> Response:
    versions = await read(request, lambda vault: [v.to_dict() for v in vault.history(given["id"])])
    for version in versions:
        if version.get("memory"):
            version["memory"] = _renamed(version["memory"])
    return JSONResponse(versions)


async def health(request: Request, given: dict[str, Any]) -> Response:
    return JSONResponse({"status": "ok"})


async def openapi(request: Request, given: dict[str, Any]) -> Response:
    return JSONResponse(request.app.state.openapi)


#: `recall --at` and `search --at`: a person's token only (`_as_of`).
AT = Param(
    "at",
    "The mind as it was then, read from git: a commit (sha, HEAD~2, a branch), a date (2026-05-01) or a "
    "duration back (30d); a person's token only (a Mind Key gets 403).",
    STRING,
)
RECALL_PARAMETERS = (
    Param("q", "What the agent is working on: pinned memories, then the best matches.", STRING),
    Param("budget", "The most tokens the text may take (characters / 4); 0: no limit.", {"type": "integer"}),
    Param("limit", "With q: the most matches besides the pinned memories.", LIMIT),
    Param("format", "text (default) or json (what was chosen, with scores).", {"enum": ["text", "json"]}),
    Param("include_superseded", "Also memories marked superseded.", BOOL),
    Param(
        "include_proposed",
        "Also captured memories waiting for review, marked proposed; a person's token only (a Mind Key's "
        "recall never holds them).",
        BOOL,
    ),
    AT,
)
RECALL_RESPONSES = {
    "200": {
        "description": "The recall: plain text by default, the report with ?format=json.",
        "content": {
            "text/plain": {"schema": STRING},
            "application/json": {"schema": ref("schemas", "RecallReport")},
        },
    }
}
SEARCH_RESPONSES = {
    "200": ok("The hits.", {"type": "array", "items": ref("schemas", "SearchHit")})["200"]
    | {
        "headers": {
            NOTICE_HEADER: {
                "description": "A notice of the search, one header each (not all memories embedded for search by "
                "meaning yet: how many are; a hit holding a secret): ASCII, other characters as JSON escapes.",
                "schema": STRING,
            }
        }
    }
}
#: `memfile export`'s options.
EXPORT_PARAMETERS = (
    Param(
        "format",
        "jsonl (default): memfile's export, a header, one memory a line, a trailer with the count; "
        "json: a plain array of Synapse-shaped memories.",
        {"enum": ["jsonl", "json"], "default": "jsonl"},
    ),
    Param("raw", "Each memory also carries its file's exact text and its sha256 (a byte-exact round trip).", BOOL),
    Param("all_minds", "Every mind of the vault (a person's token only: a Mind Key gets 403).", BOOL),
)
#: `memfile import`'s options (the body is the file, so `--include-dreams`, which reads DREAMS.md beside an
#: OpenClaw folder's MEMORY.md, has no place here).
IMPORT_PARAMETERS = (
    Param("from", "The file's format (default: detected).", {"enum": IMPORT_FORMATS}),
    Param(
        "on_conflict",
        "A memory whose id is in the mind with other content: skip it, take the newer by updated_at "
        "(default), or overwrite.",
        {"enum": ON_CONFLICT, "default": "newer"},
    ),
    Param("dry_run", "Answer the plan and write nothing.", BOOL),
    Param("from_mind", "memfile's export of several minds: the mind to take.", STRING),
    Param(
        "split",
        "OpenClaw MEMORY.md: a memory per ## section (default), per top-level bullet, or the whole file.",
        {"enum": SPLITS, "default": "sections"},
    ),
    Param("category", "OpenClaw: the category of every memory (default: guessed from each heading).", STRING),
    Param(
        "max_priority",
        "The highest priority an imported memory gets (LangBot importance 5 is high unless critical).",
        {"enum": ["high", "critical"], "default": "high"},
    ),
    Param(
        "source",
        "LangBot: who the profiles come from (default agent); a Mind Key imports as an agent whatever it says.",
        {"enum": [str(s) for s in Source]},
    ),
    Param(
        "allow_secret", "A person imports contents that look like tokens or keys all the same (a Mind Key: 403).", BOOL
    ),
)
IMPORT_BODY = {
    "required": True,
    "description": "The file to import, as it is: memfile's JSONL export, Synapse's memory JSON (an array or "
    '{"memories": [...]}), a LangBot profiles or episodes envelope, or an OpenClaw MEMORY.md.',
    "content": {
        media: {"schema": {"type": "string"}}
        for media in ("application/x-ndjson", "application/json", "text/markdown", "text/plain")
    },
}
#: What `DELETE /memory` selects by: the filters of `memfile forget`, at least one.
FORGET_FILTERS = (
    Param("tag", "Only memories with this tag.", STRING),
    Param("category", "Only this category.", {"enum": [str(c) for c in Category]}),
    Param("source", "Only user or only agent memories (a Mind Key: not user).", {"enum": [str(s) for s in Source]}),
    Param("unverified", "Only unverified memories.", BOOL),
    Param("older_than", "Only memories not updated for this long: 30m, 12h, 30d, 2w.", STRING),
    Param("expired", "Only memories whose expires_at has passed.", BOOL),
)
MEMORY = ref("schemas", "Memory")
MEMORIES = {"type": "array", "items": MEMORY}
STORED = ref("schemas", "StoredMemory")

#: Every endpoint, in the order of the OpenAPI document (which Starlette also matches them in:
#: /memory/export and /memory/import before /memory/{id}, which would take them for an id).
ENDPOINTS = (
    Endpoint(
        "/memory",
        "GET",
        recall,
        "recallAtStart",
        "The start-of-session recall (the same as GET /memory/recall).",
        RECALL_RESPONSES,
        RECALL_PARAMETERS,
        extension=True,
    ),
    Endpoint(
        "/memory",
        "POST",
        store,
        "storeMemory",
        "Store a memory: 201 when created, 200 when the same category and key was updated.",
        ok("Updated (or unchanged).", STORED) | ok("Created.", STORED, "201"),
        body=NEW_MEMORY,
    ),
    Endpoint(
        "/memory",
        "DELETE",
        forget_many,
        "forgetMemories",
        "Forget every memory the filters select (they combine; at least one), in one commit listing them: "
        "memfile forget --tag... A Mind Key forgets only its agent's own unverified, non-critical memories; "
        "whatever else matches is left out (left_out), never removed.",
        ok("What was forgotten (with dry_run: would be).", ref("schemas", "ForgetReport")),
        (*FORGET_FILTERS, Param("dry_run", "Answer the list and write nothing.", BOOL)),
        extension=True,
    ),
    Endpoint(
        "/memory/recall",
        "GET",
        recall,
        "recall",
        "The prioritized summary an agent puts in its context (expired left out, unverified marked).",
        RECALL_RESPONSES,
        RECALL_PARAMETERS,
    ),
    Endpoint(
        "/memory/search",
        "GET",
        search,
        "search",
        "Full-text search, best first.",
        SEARCH_RESPONSES,
        (
            Param("q", "What to look for (at most 4,096 characters).", STRING, required=True),
            Param("tag", "Only memories with this tag (repeat: all of them).", {"type": "array", "items": STRING}),
            Param("category", "Only this category.", {"enum": [str(c) for c in Category]}),
            Param("priority", "Only this priority.", {"enum": [str(p) for p in Priority]}),
            Param("source", "Only user or only agent memories.", {"enum": [str(s) for s in Source]}),
            Param("unverified", "Only unverified memories.", BOOL),
            Param("include_expired", "Also expired memories.", BOOL),
            Param("include_superseded", "Also superseded memories.", BOOL),
            Param(
                "include_proposed",
                "Also captured memories waiting for review (a person's token; a Mind Key never sees them).",
                BOOL,
            ),
            Param("limit", "The most hits.", LIMIT),
            AT,
        ),
    ),
    Endpoint(
        "/memory/by-tag",
        "GET",
        by_tag,
        "byTag",
        "The memories with a tag (any case), newest first.",
        ok("The memories.", MEMORIES),
        (Param("tag", "The tag.", STRING, required=True), Param("include_expired", "Also expired memories.", BOOL)),
    ),
    Endpoint(
        "/memory/expiring",
        "GET",
        expiring,
        "expiring",
        "The memories that expire within a time from now, soonest first.",
        ok("The memories.", MEMORIES),
        (Param("within", "A duration: 30m, 12h, 7d (default), 2w.", {**STRING, "default": "7d"}),),
    ),
    Endpoint(
        "/memory/export",
        "GET",
        export,
        "exportMemories",
        "Every memory of the mind (a person's token may ask for every mind), as a file to keep or import "
        "elsewhere: memfile export. Expired and superseded memories are in it, marked.",
        {
            "200": {
                "description": "The export, as an attachment (Content-Disposition names the file).",
                "headers": {"Content-Disposition": {"schema": STRING}},
                "content": {"application/x-ndjson": {"schema": STRING}, "application/json": {"schema": MEMORIES}},
            }
        },
        EXPORT_PARAMETERS,
        extension=True,
    ),
    Endpoint(
        IMPORT_PATH,
        "POST",
        import_file,
        "importMemories",
        "Import a file into the mind in one commit, or write nothing (memfile import): any record that "
        "fails validation is a 400 naming it. A Mind Key imports as an agent: its memories land unverified.",
        ok("What the import did (with dry_run: would do).", ref("schemas", "ImportReport")),
        IMPORT_PARAMETERS,
        raw_body=IMPORT_BODY,
        extension=True,
        max_body_size=MAX_IMPORT_BODY_BYTES,  # a whole export file
    ),
    Endpoint(
        "/memory/proposals",
        "GET",
        proposals,
        "listProposals",
        "The captured memories waiting for review (status proposed), oldest first, as memfile review: a "
        "person's token only (a Mind Key gets 403). Each carries captured_from, captured_turns, captured_lines "
        "(the messages, secrets masked) and, for one that would update a memory, proposed_supersedes (its id) "
        "in extra.",
        ok("The proposals.", MEMORIES),
        extension=True,
    ),
    Endpoint(
        "/memory/{id}",
        "GET",
        show,
        "getMemory",
        "One memory, with its wiki links and backlinks.",
        ok("The memory, with `links` and `backlinks`.", ref("schemas", "LinkedMemory")),
        extension=True,
    ),
    Endpoint(
        "/memory/{id}",
        "PUT",
        update,
        "updateMemory",
        "Update a memory's content or other fields (its category and key never change: 400).",
        ok("The memory as now stored.", STORED),
        body=MEMORY_CHANGE,
    ),
    Endpoint(
        "/memory/{id}",
        "DELETE",
        forget,
        "forgetMemory",
        "Forget a memory (git keeps every version). An agent cannot forget a verified or critical one.",
        ok("The memory as it was.", MEMORY),
        extension=True,
    ),
    Endpoint(
        "/memory/{id}/verify",
        "POST",
        verify,
        "verifyMemory",
        "Mark a memory as checked by a person: a person's token only (a Mind Key gets 403).",
        ok("The memory, verified.", STORED),
    ),
    Endpoint(
        "/memory/{id}/accept",
        "POST",
        accept,
        "acceptProposal",
        "Accept a captured memory waiting for review, as memfile review accept: it becomes a verified memory "
        "in recall and search, and supersedes the memory it would update; the body's fields change it first "
        "(memfile review edit). One commit. A person's token only (a Mind Key gets 403); a REF that is no "
        "proposal: 404.",
        ok("The memory, accepted.", MEMORY),
        body=ACCEPTANCE,
        extension=True,
        body_required=False,
    ),
    Endpoint(
        "/memory/{id}/reject",
        "POST",
        reject,
        "rejectProposal",
        "Reject a captured memory waiting for review, as memfile review reject: it is forgotten (git keeps it). "
        "One commit. A person's token only (a Mind Key gets 403); a REF that is no proposal: 404.",
        ok("The memory as it was.", MEMORY),
        extension=True,
    ),
    Endpoint(
        "/memory/capture",
        "POST",
        capture,
        "captureMemories",
        "Memories from a conversation, as memfile capture: the model [capture] names in memfile.toml picks "
        "them, memfile decides each (add, update, skip; one commit). With review they wait as proposed. "
        "No model configured: 400, nothing written; the model failing: 502.",
        ok("The decisions.", ref("schemas", "CaptureReport")),
        body=CAPTURE,
        extension=True,
    ),
    Endpoint(
        "/memory/{id}/purge",
        "POST",
        purge,
        "purgeMemory",
        "Remove a memory (or, with text, one string of it) from every version of the vault's history, as "
        "memfile purge: a person's token only (a Mind Key gets 403). Recorded in .memfile-purged.",
        ok("What went (with dry_run: would go).", ref("schemas", "PurgeReport")),
        body=PURGE,
        extension=True,
    ),
    Endpoint(
        "/memory/{id}/history",
        "GET",
        history,
        "history",
        "Every version of a memory, newest first (also of a forgotten one).",
        ok("The versions.", {"type": "array", "items": ref("schemas", "Version")}),
        extension=True,
    ),
    Endpoint(
        "/health",
        "GET",
        health,
        "health",
        "Liveness: the server answers (no credential needed, nothing about the vault).",
        ok("Alive.", {"type": "object", "properties": {"status": {"const": "ok"}}}),
        extension=True,
        public=True,
    ),
    Endpoint(
        "/openapi.json",
        "GET",
        openapi,
        "openapi",
        "This document.",
        ok("The OpenAPI document.", {"type": "object"}),
        extension=True,
        public=True,
    ),
)
#: /mcp, served by its own mount (`McpMount`, its own checks) when the MCP SDK is installed.
MCP = Endpoint(
    "/mcp",
    "POST",
    None,
    "mcp",
    "The MCP server (streamable HTTP, stateless, JSON answers): the same tools and rules as "
    "`memfile mcp`, acting for this request's credential.",
    {
        "200": {
            "description": "MCP's streamable HTTP transport (JSON-RPC; JSON or an event stream).",
            "content": {"application/json": {"schema": {"type": "object"}}, "text/event-stream": {"schema": STRING}},
        }
    },
    extension=True,
)


def openapi_document(mcp: bool) -> dict[str, Any]:
    """The OpenAPI document of the route table (`mcp`: with /mcp)."""
    return document((*ENDPOINTS, MCP) if mcp else ENDPOINTS)


def routes(endpoints: Iterable[Endpoint]) -> list[BaseRoute]:
    """A Starlette route for each path of the table, with a handler per method (so a 405 lists every method
    the path has); HEAD is answered as GET."""
    by_path: dict[str, dict[str, Endpoint]] = {}
    for endpoint in endpoints:
        by_path.setdefault(endpoint.path, {})[endpoint.method] = endpoint
    return [_route(path, methods) for path, methods in by_path.items()]


def _route(path: str, methods: dict[str, Endpoint]) -> Route:
    async def dispatch(request: Request) -> Response:
        endpoint = methods["GET" if request.method == "HEAD" else request.method]
        assert endpoint.handler is not None
        return await endpoint.handler(request, await endpoint.read(request))

    limit = next((e.max_body_size for e in methods.values() if e.max_body_size), None)
    return Route(path, dispatch, methods=list(methods), name=path, max_body_size=limit)


def build_app(
    minds: Minds,
    keys: KeyStore,
    *,
    allowed_hosts: Iterable[str],
    mcp: bool = True,
) -> Starlette:
    """The HTTP API over every mind of `minds`' vault, with `keys` as its credentials, and the memory console
    at /console. `allowed_hosts`: the names the Host header may carry (IP addresses are always taken);
    `mcp`: mount the MCP server at /mcp (when the MCP SDK is installed)."""
    mount = McpMount(minds) if mcp and McpMount.available() else None
    served = routes(ENDPOINTS) + ([mount.route()] if mount is not None else [])

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if mount is not None:
                await mount.stop()

    app = Starlette(
        routes=served,
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
    app.state.minds = minds
    app.state.openapi = openapi_document(mcp=mount is not None)
    app.router.redirect_slashes = False  # `/memory/` is no endpoint: a 404, not a redirect to build from Host
    return app
