"""The MCP face: the Model Context Protocol server for LLM agents, over stdio (one mind) and over HTTP.

Built on the official `mcp` SDK (the extra `memfile-vault[mcp]`). Both transports share every tool,
description and rule (`build_server`) and differ only in who a call acts for (a `Caller`): stdio is
one mind, as the agent; over HTTP each call acts for its request's credential. Every tool goes through
`Vault` on the worker thread of `Minds`. Errors come back as tool errors in an agent's terms, and every
request gets an answer: unknown or mistyped arguments are refused by name, and a message the SDK
cannot read gets an error where the SDK would drop it.
"""

from __future__ import annotations

import difflib
import inspect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, suppress
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCResponse,
    TextContent,
    ToolAnnotations,
)
from pydantic import ValidationError

from ._version import __version__
from .config import find_vault, select_mind
from .errors import Face, MemfileError, Refused, masked, told
from .memory_tool import MemoryToolBackend, MemoryToolError
from .model import Source
from .vault import Vault, other_minds
from .worker import Caller, Minds

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

INSTRUCTIONS = """Long-term memory of one person ("mind"), kept as files.
Call `recall` with the user's request at the start of a task to get what you must know.
Call `search` before answering a question about the past or before storing (to avoid duplicates).
Call `store` when you learn a durable fact, preference, decision or mistake worth remembering;
use `supersedes` when the new memory corrects or replaces an older one (do not store contradictions).
You store as an agent: your memories are unverified until the person verifies them."""

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


def _doc(method: Any, when: str, without: tuple[str, ...] = ()) -> str:
    """A tool's description: when to use it, then the Vault method's own docstring (in an agent's terms),
    its Args entries of `without` left out (what the method takes and an agent may not: recall's `at`)."""
    doc = inspect.getdoc(method) or ""
    for name in without:
        doc = re.sub(rf"^    {name}: .*\n(?:        .*\n)*", "", doc, flags=re.MULTILINE)
    return for_agent(f"{when}\n\n{doc}")


# --- errors in an agent's terms -------------------------------------------------------------

#: The tools, each named after the CLI command of the same verb (`memfile store` = the `store` tool).
TOOL_NAMES = ("recall", "search", "store", "show", "list", "forget", "expiring", "tags", "capture", "memory")

#: What an agent asks the user for, by the CLI command that does it (a command with no tool: for people).
ASK_THE_USER = {
    "verify": "ask the user to verify it",
    "reactivate": "ask the user to bring it back",
    "doctor": "ask the user to check the vault",
    "sync": "ask the user to sync the vault",
    "init": "ask the user to set up the vault",
    "resolve": "ask the user to resolve the conflict",
    "edit": "ask the user to edit it",
    "history": "ask the user to look at its history",
    "log": "ask the user to look at the history",
    "restore": "ask the user to restore it",
    "undo": "ask the user to undo it",
    "remote": "ask the user to set up the remote",
}

#: A command line left in a message: `run: memfile verify REF`, `(memfile forget REF)`, `with memfile store`.
_COMMAND = re.compile(
    r"(?P<lead>\b(?:run|with|see|see all|read one whole):? |\(|`)?"
    rf"memfile (?P<verb>{'|'.join(TOOL_NAMES + tuple(ASK_THE_USER))})\b[^;,)`\n]*`?"
)


def for_agent(message: str) -> str:
    """`message` (written for a person at a terminal) as an agent can act on it: the tool to call, or
    what to ask the user, where the library names a command line; no exit code, no file that does not ship."""
    return _COMMAND.sub(_command_for_agent, message)


def _command_for_agent(match: re.Match[str]) -> str:
    lead, verb = (match["lead"] or "").rstrip(": "), match["verb"]
    opening = "(" if lead == "(" else ""
    if verb not in TOOL_NAMES:
        return opening + ASK_THE_USER[verb]
    tool = f"the `{verb}` tool"
    if lead == "run":
        return f"call {tool}"
    if lead in ("", "(", "`", "with"):
        return opening + ("with " if lead == "with" else "") + tool
    return f"{lead} with {tool}"


#: The closing line of a recall that was cut (`recall._closing`): what was cut, and how to see it.
_RECALL_CLOSING = re.compile(r"\(\d+ (?:left out|shortened)[^\n]* to fit \d+ tokens; [^\n]*\)\n?\Z")


def _closing_for_agent(text: str) -> str:
    """A recall's text with its closing line in an agent's terms; the memories' own text is left alone."""
    closing = _RECALL_CLOSING.search(text)
    if closing is None or (closing.start() and text[closing.start() - 1] != "\n"):
        return text
    return text[: closing.start()] + for_agent(closing.group())


def _tool_error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


#: Why an argument an agent tried does not exist, when there is more to say than its name.
_NO_SUCH_ARGUMENT = {
    "verified": "only the user can verify a memory: ask the user",
    "source": "an agent always stores as the agent",
    # What a person forgot or corrected since must not come back into an agent's context (HTTP: a Mind Key's
    # `at` gets 403): looking back is the user's (memfile recall --at, the console's Recall page).
    "at": "an agent recalls and searches the mind as it is now; to see it as of a date, ask the user",
}


#: The notices of the tool call being answered (`answer_tool_calls` and `build_server`'s `call`).
_NOTICES: ContextVar[list[str] | None] = ContextVar("memfile_notices", default=None)


def answer_tool_calls(server: MCPServer) -> Callable[..., Any]:
    """Middleware for `server`'s tool calls: one with an argument the tool does not have is a tool error
    naming it (the SDK would drop it silently, and the agent believe it did something); one whose arguments
    the SDK's own check refuses gets a tool error in memfile's words, where the SDK answers with pydantic's
    report and a link to its documentation; an answer is followed by the notices of its call (a secret a
    read served, say), each a text of its own after the result, in an agent's terms."""

    async def middleware(ctx: Any, call_next: Callable[[Any], Any]) -> Any:
        if ctx.method != "tools/call" or not isinstance(ctx.params, Mapping):
            return await call_next(ctx)
        name, arguments = ctx.params.get("name"), ctx.params.get("arguments")
        tool = server._tool_manager.get_tool(name) if isinstance(name, str) else None  # noqa: SLF001 - the SDK's own check
        if tool is not None and isinstance(arguments, Mapping):
            known = tuple(tool.parameters.get("properties", ()))
            unknown = [key for key in arguments if key not in known]
            if unknown:
                return _tool_error(_unknown_arguments(tool.name, unknown, known))
            try:
                tool.fn_metadata.validate_arguments(dict(arguments))
            except ValidationError as exc:
                return _tool_error(_wrong_arguments(tool.name, exc))
        notices: list[str] = []
        token = _NOTICES.set(notices)  # filled by `build_server`'s `call`
        try:
            result = await call_next(ctx)
        finally:
            _NOTICES.reset(token)
        if notices and isinstance(result, dict) and not result.get("isError"):
            said = [{"type": "text", "text": for_agent(told(notice, Face.MCP))} for notice in notices]
            result = result | {"content": [*result["content"], *said]}
        return result

    return middleware


#: What an argument must be, by pydantic's error type (the types memfile's tools take).
_MUST_BE = {
    "string_type": "text",
    "list_type": "a list of text",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
}


def _wrong_arguments(tool: str, problem: ValidationError) -> str:
    """A tool error naming each argument the SDK's check refused, what it must be and what came."""
    wrong = []
    for error in problem.errors():
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]).lstrip(".")
        if error["type"] == "missing":
            wrong.append(f"the argument {where!r} is missing")
            continue
        must = _MUST_BE.get(error["type"]) or str(error["msg"])[:1].lower() + str(error["msg"])[1:]
        value = error.get("input")  # masked when it looks like a secret (`errors.masked`), a string in its quotes
        given = (
            json.dumps(masked(value), ensure_ascii=False)
            if isinstance(value, str)
            else masked(json.dumps(value, ensure_ascii=False, default=str))
        )
        wrong.append(f"{where!r} must be {must}, not {given[:100]}{'…' if len(given) > 100 else ''}")
    return f"the `{tool}` tool cannot take these arguments: {'; '.join(wrong)}; nothing was done."


def _unknown_arguments(tool: str, unknown: list[str], known: tuple[str, ...]) -> str:
    def why(name: str) -> str:
        close = difflib.get_close_matches(name, known, n=1)
        reason = _NO_SUCH_ARGUMENT.get(name) or (f"did you mean {close[0]!r}?" if close else "")
        return f"{name!r}" + (f" ({reason})" if reason else "")

    names = ", ".join(why(masked(str(name))[:100]) for name in unknown)
    allowed = f"its arguments are {', '.join(known)}" if known else "it takes no arguments"
    plural = "s" if len(unknown) > 1 else ""
    return f"the `{tool}` tool has no argument{plural} {names}; nothing was done: {allowed}."


# --- messages the SDK cannot read --------------------------------------------------------------

#: A JSON token of a line that does not parse whole: a string, a run of opening or closing brackets,
#: a colon or comma, or a bare word (number, true, false, null).
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[{]+|[\]}]+|[:,]|[^\s\[\]{}:,"]+')


def unreadable_answer(problem: Exception) -> JSONRPCMessage:
    """The answer to a message the SDK's transport could not read (it hands over the exception, and the
    SDK drops it: the client waits forever). A `tools/call` whose id can be found gets a tool error, so
    the agent sees it; anything else a JSON-RPC error (`id: null` when the id cannot be found)."""
    errors = problem.errors() if hasattr(problem, "errors") else []  # pydantic's ValidationError
    reason = str(errors[0].get("msg", "")) if errors else f"{type(problem).__name__}: {problem}"
    members, why, code = _read_again(_received(errors), reason)
    request_id = members.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        request_id = None
    if request_id is not None and members.get("method") == "tools/call":
        result = _tool_error(why).model_dump(by_alias=True, mode="json", exclude_none=True)
        return JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=why))


def _received(errors: list[Any]) -> Any:
    """The message as received, from pydantic's errors: the line for invalid JSON; the parsed object
    for JSON that is no JSON-RPC message (a top-level "field required" error holds it)."""
    parsed = [e["input"] for e in errors if isinstance(e.get("input"), dict) and len(e.get("loc", ())) <= 2]
    return parsed[0] if parsed else errors[0].get("input") if errors else None


def _read_again(raw: Any, reason: str) -> tuple[dict[str, Any], str, int]:
    """(the message's top-level members, why it cannot be read, the JSON-RPC error code)."""
    if isinstance(raw, dict):  # JSON, but not a JSON-RPC message
        return raw, f"not a JSON-RPC message the server can read ({reason}); nothing was done", INVALID_REQUEST
    if not isinstance(raw, str):
        return {}, f"the server could not read a message ({reason}); nothing was done", PARSE_ERROR
    if "recursion limit" in reason:
        why = "the request is nested too deep to read (JSON up to about 200 levels); send plain values"
    else:
        try:
            message = json.loads(raw)
        except RecursionError:
            why = "the request is nested too deep to read; send plain values"
        except ValueError as exc:
            why = f"the line is not JSON ({exc}); send one JSON-RPC message per line"
        else:
            where = _lone_surrogate(message)
            why = f"the request cannot be read ({reason})"
            if where is not None:
                why = f"{where} holds a lone surrogate, half of a character (an emoji split in two?): send whole characters"
            return message if isinstance(message, dict) else {}, f"{why}; nothing was done", PARSE_ERROR
    return _top_members(raw), f"{why}; nothing was done", PARSE_ERROR


def _top_members(line: str) -> dict[str, Any]:
    """The scalar members of the top-level object of a line that does not parse whole (cut short, nested
    too deep): its `id` and `method`, when they are there, before or after any deep member."""
    found: dict[str, Any] = {}
    depth, key, previous = 0, None, ""
    for match in _JSON_TOKEN.finditer(line):
        token = match.group()
        if token[0] in "[{":
            depth += len(token)
        elif token[0] in "]}":
            depth -= len(token)
        elif depth == 1 and token == ":" and previous.startswith('"'):
            key, previous = previous, token
            continue
        elif depth == 1 and key is not None and token != ",":
            with suppress(ValueError):
                found.setdefault(json.loads(key), json.loads(token))
            if "id" in found and "method" in found:
                break
        key, previous = None, token
    return found


def _lone_surrogate(message: Any) -> str | None:
    """Where in a parsed message a string (a value or a key) holds a lone surrogate: `argument 'query'`."""
    stack: list[tuple[tuple[str, ...], Any]] = [((), message)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str) and not _encodes(item):
            return _place(path)
        if isinstance(item, dict):
            for key, inner in item.items():
                if not _encodes(key):
                    return _place((*path, key))
                stack.append(((*path, key), inner))
        elif isinstance(item, list):
            stack.extend(((*path, str(n)), inner) for n, inner in enumerate(item))
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _place(path: tuple[str, ...]) -> str:
    if len(path) >= 3 and path[:2] == ("params", "arguments"):
        return f"argument {path[2]!r}"
    return f"the request's {'.'.join(path)!r}"  # repr: the surrogate is written as an escape


class _Answering(anyio.abc.ObjectReceiveStream[SessionMessage]):
    """The stdio transport's read stream, with each message it could not read answered on `write`
    (`unreadable_answer`) instead of handed to the SDK, which would drop it. anyio's base class makes
    it iterable and an async context manager over `receive` and `aclose`."""

    def __init__(self, inner: Any, write: Any) -> None:
        self.inner, self.write = inner, write

    @property
    def last_context(self) -> Any:  # the sender's context, which the SDK looks for on its read stream
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> SessionMessage:
        while True:
            item = await self.inner.receive()
            if not isinstance(item, Exception):
                return item
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):  # else the client is gone
                await self.write.send(SessionMessage(unreadable_answer(item)))

    async def aclose(self) -> None:
        await self.inner.aclose()


async def serve_stdio(server: MCPServer) -> None:
    """`server.run("stdio")`, with every message answered (`_Answering`)."""
    lowlevel = server._lowlevel_server  # noqa: SLF001 - how the SDK's own in-memory client runs a server on its streams
    async with stdio_server() as (read_stream, write_stream):
        answering = _Answering(read_stream, write_stream)
        await lowlevel.run(answering, write_stream, lowlevel.create_initialization_options())


def build_server(minds: Minds, caller_of: Callable[[Context], Caller], read_minds: Sequence[str] = ()) -> MCPServer:
    """The MCP server over `minds`: every tool call runs on its worker thread, in the mind and as the source
    of `caller_of(ctx)` (stdio: one mind, as the agent; HTTP: the credential of the request that carried it).
    `read_minds`: other minds the recall tool reads too, read-only (`Vault.recall`'s `with_minds`)."""
    server = MCPServer(
        "memfile",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",  # the SDK's INFO lines ("Terminating session: None" for every stateless POST) are noise
    )
    server.middleware.append(answer_tool_calls(server))
    recall_budget = minds.config.mcp_recall_budget  # `[mcp] recall_budget`; None: no limit

    async def call(ctx: Context, work: Callable[[Vault], Any], read: bool = False) -> Any:
        def noticed(vault: Vault) -> tuple[Any, list[str]]:
            return work(vault), list(vault.notices)

        try:
            answer, notices = await minds.call(caller_of(ctx), noticed, read=read)
            if (kept := _NOTICES.get()) is not None:
                kept.extend(notices)
            return answer
        except MemfileError as exc:
            raise ToolError(for_agent(exc.said(Face.MCP))) from None
        except Exception as exc:  # noqa: BLE001 - a tool call must never take the server down
            raise ToolError(
                f"memfile failed unexpectedly: {type(exc).__name__}: {exc} (a bug in memfile, "
                "not in this call: tell the user)"
            ) from None

    default_budget = f"{recall_budget} tokens" if recall_budget else "no limit"

    @server.tool(
        description=_doc(
            Vault.recall,
            "Call at the start of a task with the user's request as `query`: "
            "the memories to keep in mind (pinned profile, then the best matches), within a budget "
            f"(without `budget`: {default_budget}, the vault's `[mcp] recall_budget`).",
            without=("at", "record", "include_proposed"),
        ),
        annotations=READ,
    )
    async def recall(ctx: Context, query: str | None = None, budget: int | None = None, limit: int = 10) -> str:
        budget = recall_budget if budget is None else budget
        text = await call(
            ctx, lambda vault: vault.recall(query=query, limit=limit, budget=budget, with_minds=read_minds), read=True
        )
        return _closing_for_agent(text)

    @server.tool(
        description=_doc(Vault.search, "Find memories about a topic, best first.", without=("at", "include_proposed")),
        annotations=READ,
    )
    async def search(
        ctx: Context,
        query: str,
        tags: list[str] | None = None,
        category: str | None = None,
        priority: str | None = None,
        limit: int = 10,
    ) -> list[dict[str, Any]]:
        def work(vault: Vault) -> list[dict[str, Any]]:
            return [
                hit.to_dict()
                for hit in vault.search(query, tags=tags, category=category, priority=priority, limit=limit)
            ]

        return await call(ctx, work, read=True)  # a notice (not all embedded) is one more block after the hits

    @server.tool(
        description=_doc(
            Vault.store,
            "Remember something durable (a fact, preference, decision, mistake). "
            "Use `supersedes` with the REF of an older memory this one corrects.",
        ),
        annotations=WRITE,
    )
    async def store(
        ctx: Context,
        category: str,
        key: str,
        content: str,
        priority: str | None = None,
        tags: list[str] | None = None,
        confidence: float | None = None,
        expires: str | None = None,
        supersedes: str | None = None,
    ) -> dict[str, Any]:
        options: dict[str, Any] = {
            "priority": priority,
            "tags": tags,
            "confidence": confidence,
            "supersedes": supersedes,
        }
        if expires is not None:
            options["expires"] = expires
        result = await call(ctx, lambda vault: vault.store(category, key, content, **options))
        return result.memory.to_dict() | {
            "created": result.created,
            "changed": result.changed,
            "commit": result.commit,
            "superseded": result.superseded.ref if result.superseded else None,
        }  # its notices follow as texts of their own, as every tool's do

    @server.tool(
        description=_doc(
            Vault.get,
            "Read one memory in full by REF (an id, category/key, or key), with its wiki links ([[key]]) "
            "and backlinks (`links`, `backlinks`: each with its relation and the memory it leads to).",
        ),
        annotations=READ,
    )
    async def show(ctx: Context, ref: str) -> dict[str, Any]:
        return await call(ctx, lambda vault: vault.linked(ref).to_dict(), read=True)

    @server.tool(
        name="list",
        description=_doc(Vault.list, "List memories by category, tags or priority.", without=("status",)),
        annotations=READ,
    )
    async def list_(
        ctx: Context,
        category: str | None = None,
        tags: list[str] | None = None,
        priority: str | None = None,
        unverified: bool = False,
    ) -> list[dict[str, Any]]:
        def work(vault: Vault) -> list[dict[str, Any]]:
            memories = vault.list(category=category, tags=tags, priority=priority, unverified=unverified)
            return [m.to_dict() for m in memories]

        return await call(ctx, work, read=True)

    @server.tool(
        description=_doc(
            Vault.forget,
            "Remove a memory that is wrong or no longer wanted (git keeps it). "
            "Prefer `store` with `supersedes` when correcting; a memory a person verified: ask the user.",
        ),
        annotations=DELETE,
    )
    async def forget(ctx: Context, ref: str) -> dict[str, Any]:
        return await call(ctx, lambda vault: vault.forget(ref).to_dict())

    @server.tool(
        description=(
            "Hand over a whole exchange (chat messages: role and content) to be remembered: the model the "
            "vault's memfile.toml names ([capture]) picks what is worth keeping, memfile adds, updates or skips "
            "each against this mind (one commit). What it keeps waits for the user's review (memfile review) "
            "before any recall or search shows it. Answers each decision and its reason."
        ),
        annotations=WRITE,
    )
    async def capture(ctx: Context, messages: list[dict[str, Any]], session: str | None = None) -> dict[str, Any]:
        import anyio

        from .extractor import ChatEndpoint

        try:  # the model is asked off the worker thread: it may take [capture] timeout
            answer = await anyio.to_thread.run_sync(ChatEndpoint.from_config(minds.config).ask, messages)
        except MemfileError as exc:
            raise ToolError(for_agent(exc.said(Face.MCP))) from None
        report = await call(ctx, lambda vault: vault.capture(messages, lambda _s, _u: answer, session))
        return report.to_dict()

    @server.tool(description=_doc(Vault.expiring, "Memories that expire soon (to renew or let go)."), annotations=READ)
    async def expiring(ctx: Context, within: str = "7d") -> list[dict[str, Any]]:
        return await call(ctx, lambda vault: [m.to_dict() for m in vault.expiring(within)], read=True)

    @server.tool(
        description=_doc(Vault.tags, "Every tag in use, with counts (to reuse tags when storing)."), annotations=READ
    )
    async def tags(ctx: Context) -> list[dict[str, Any]]:
        return await call(ctx, lambda vault: [{"tag": tag, "count": count} for tag, count in vault.tags()], read=True)

    @server.tool(
        description=(
            "Claude's memory tool (memory_20250818), for clients without the Anthropic SDK: one command on "
            "/memories, this mind's folder. view (path, view_range), create (path, file_text), str_replace "
            "(path, old_str, new_str), insert (path, insert_line, insert_text), delete (path), rename "
            "(old_path, new_path). Memories are Markdown files at /memories/<category>/<key>.md."
        ),
        annotations=DELETE,
    )
    async def memory(
        ctx: Context,
        command: str,
        path: str | None = None,
        view_range: list[int] | None = None,
        file_text: str | None = None,
        old_str: str | None = None,
        new_str: str | None = None,
        insert_line: int | None = None,
        insert_text: str | None = None,
        old_path: str | None = None,
        new_path: str | None = None,
    ) -> str:
        arguments: dict[str, Any] = dict(path=path, view_range=view_range, file_text=file_text, old_str=old_str)
        arguments |= dict(new_str=new_str, insert_line=insert_line, insert_text=insert_text)
        arguments |= dict(old_path=old_path, new_path=new_path)
        given = {name: value for name, value in arguments.items() if value is not None}

        def work(vault: Vault) -> tuple[str, bool]:
            try:
                return MemoryToolBackend(vault).run({"command": command, **given}), False
            except MemoryToolError as exc:  # the model's mistake: an error result, not memfile's failure
                return str(exc), True

        text, refused = await call(ctx, work, read=command == "view")
        if refused:
            raise ToolError(text)
        return text

    return server


def serve(path: str | None, mind: str | None, watch: bool = True, read_minds: Sequence[str] = ()) -> None:
    """Run the stdio MCP server for one mind, as the agent, until the client disconnects.

    A watcher keeps the index warm, unless another one (`memfile watch`) already does. `read_minds`:
    other minds its recall reads too, read-only (every tool but recall sees the one mind only).
    """
    minds = Minds(find_vault(path), watch=watch)
    try:
        caller = Caller(select_mind(minds.root, minds.config, mind), Source.AGENT)
        minds.call_sync(caller, lambda vault: None)  # opened now: a mind that cannot be opened fails before serving
        for other in other_minds(caller.mind, read_minds, "read-mind"):  # so does a read mind that is wrong
            select_mind(minds.root, minds.config, other)  # or does not exist (NotFound)
        anyio.run(serve_stdio, build_server(minds, lambda ctx: caller, read_minds))
    finally:
        minds.close()


# --- over HTTP (`memfile serve` mounts it at /mcp) ---------------------------------------------

#: Where the serving app's authentication puts the request's `Caller` (memfile.server's middleware).
CALLER_SCOPE_KEY = "memfile.caller"
#: The largest request /mcp reads: a memory file's 10 MiB, with room for JSON's escapes (the SDK's own
#: default, 4 MiB, would refuse a store the HTTP API takes); the serving app refuses larger ones first.
MAX_REQUEST_BYTES = 11 * 1024 * 1024


def _caller_of_request(ctx: Context) -> Caller:
    """The `Caller` of the HTTP request that carried this tool call (set by the serving app's authentication)."""
    request = ctx.request_context.request
    caller = getattr(request, "scope", {}).get(CALLER_SCOPE_KEY)
    if not isinstance(caller, Caller):  # the serving app's authentication did not run: act for nobody
        raise Refused("this request carries no credential memfile accepted; nothing was done")
    return caller


class HttpApp:
    """The streamable-HTTP MCP endpoint over `minds`: the same tools and rules as stdio, each tool call acting
    for the `Caller` at `scope["memfile.caller"]` of the HTTP request that carried it.

    An ASGI app routed at one path, behind the serving app's Host check and authentication; its session
    manager must run for as long as the app serves (`async with app.run(): ...` in the app's lifespan).
    Stateless: every POST stands alone and is answered as plain JSON. The SDK's DNS-rebinding check is
    off (the serving app's Host allow-list is the one check). A call carrying no `Caller` is refused.
    """

    def __init__(self, minds: Minds) -> None:
        self.server = build_server(minds, _caller_of_request)
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            max_request_body_size=MAX_REQUEST_BYTES,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.session_manager = self.server.session_manager

    def run(self) -> AbstractAsyncContextManager[None]:
        """The session manager's life: enter it in the serving app's lifespan (once)."""
        return self.session_manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.session_manager.handle_request(scope, receive, send)


#: The streamable-HTTP MCP endpoint over `minds` (see `HttpApp` for how to route and run it).
http_app = HttpApp
