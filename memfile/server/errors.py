"""The HTTP face's errors: every answer that is not a success, as JSON `{"error": NAME, "message": ...}`.

A library error's status comes from its class, in one place (`STATUS`); Starlette's own errors get the
same shape. No body ever holds a traceback, and a value a message repeats is cut to `ECHO_LIMIT`.
"""

from __future__ import annotations

import re
from http import HTTPStatus

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from ..errors import (
    EXIT_BAD_INPUT,
    EXIT_CONFLICT,
    EXIT_NOT_FOUND,
    Busy,
    ExtractorFailed,
    Face,
    InvalidInput,
    MemfileError,
    Refused,
    echo,
    masked,
)


class Unauthorized(MemfileError):
    """A request without a valid credential (none, unknown, revoked): 401."""


class KeysUnusable(MemfileError):
    """The keys file cannot be trusted or read, so no credential can be checked: 503 (the server's log
    has the library's message, which names files of the server's machine)."""


#: The status of the library errors their exit code does not give (first match along the class hierarchy).
STATUS: tuple[tuple[type[MemfileError], int], ...] = (
    (Unauthorized, 401),
    (Busy, 503),
    (KeysUnusable, 503),
    (Refused, 403),
    (ExtractorFailed, 502),  # the model endpoint capture asked gave no usable answer: a bad gateway
)
#: Every other library error, by its exit code (a file that cannot be read: 400, like the CLI's exit 2).
STATUS_BY_EXIT_CODE = {EXIT_BAD_INPUT: 400, EXIT_NOT_FOUND: 404, EXIT_CONFLICT: 409}
#: Seconds a client is asked to wait after a 503 (another process is at work on the vault: `Busy`).
RETRY_AFTER = 2
#: The names of Starlette's own errors that HTTP's phrase (Python 3.11's) does not say well.
HTTP_ERROR_NAMES = {413: "ContentTooLarge"}
#: What a client reads of a bug: the details are on the server's stderr, never in a body.
BUG_MESSAGE = "memfile failed unexpectedly (a bug in memfile, not in this request); the server's log has the details"
#: The most characters of a value an error message repeats (a REF, a key, a path); the rest is cut to "…".
ECHO_LIMIT = 200
ELLIPSIS = "\u2026"
#: A value a message quotes, as Python's repr writes it ('x' or "x"): after no letter or quote, before none
#: (so the apostrophe of "a person's token" is no quote).
_QUOTED = re.compile(r"""(?<![\w'"])('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")(?![\w'"])""")
#: Any other run of characters without a space that is longer than a quoted value cut short (a path).
_LONG_RUN = re.compile(rf"\S{{{ECHO_LIMIT + 40},}}")


def clipped(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text`, cut to `limit` characters and an ellipsis when it is longer."""
    return text if len(text) <= limit else text[:limit] + ELLIPSIS


def clip_echoes(message: str) -> str:
    """`message` with every value it quotes cut to ECHO_LIMIT characters (its closing quote kept), and every
    other run of characters without a space that is much longer too."""

    def quoted(match: re.Match[str]) -> str:
        text = match.group(0)
        return text if len(text) <= ECHO_LIMIT + 2 else text[: ECHO_LIMIT + 1] + ELLIPSIS + text[-1]

    return _LONG_RUN.sub(lambda match: clipped(match.group(0)), _QUOTED.sub(quoted, message))


class _Echo:
    """A value whose repr is cut to ECHO_LIMIT characters (a string keeps its quotes), masked first when it
    looks like it holds a secret (`errors.echo`: a token cut short would no longer look like one)."""

    def __init__(self, value: object) -> None:
        self.text = repr(clipped(masked(value))) if isinstance(value, str) else clipped(echo(value))

    def __repr__(self) -> str:
        return self.text


def public_message(exc: MemfileError, face: Face = Face.HTTP) -> str:
    """What an answer says of a library error: its message in this API's words (`Face.HTTP`; the console's
    pages: `Face.CONSOLE`), with the values it repeats cut (ECHO_LIMIT). An InvalidInput is said again from
    its fields, so a value of any type (a tag that is an object) is cut too."""
    if type(exc) is InvalidInput and exc.value is not None:
        field = clipped(exc.field)
        return clip_echoes(str(InvalidInput(field, _Echo(exc.value), exc.allowed, reason=exc.reason)))
    return clip_echoes(exc.said(face))


def error_response(status: int, name: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The one shape of every error answer (the values `message` repeats cut to ECHO_LIMIT characters)."""
    return JSONResponse({"error": name, "message": clip_echoes(message)}, status_code=status, headers=headers)


def status_of(exc: MemfileError) -> int:
    """The HTTP status of a library error (500 only for an error no class above names)."""
    for cls, status in STATUS:
        if isinstance(exc, cls):
            return status
    return STATUS_BY_EXIT_CODE.get(exc.exit_code, 500)


def memfile_error_response(exc: MemfileError) -> JSONResponse:
    """A library error as its JSON answer, with the library's message."""
    headers = None
    if isinstance(exc, Unauthorized):
        headers = {"WWW-Authenticate": "Bearer"}
    elif isinstance(exc, Busy):
        headers = {"Retry-After": str(RETRY_AFTER)}
    return error_response(status_of(exc), type(exc).__name__, public_message(exc), headers)


async def on_memfile_error(request: Request, exc: Exception) -> Response:
    """Starlette's handler for MemfileError (and every subclass)."""
    assert isinstance(exc, MemfileError)
    return memfile_error_response(exc)


async def on_http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (no route: 404, wrong method: 405, body too large: 413) as JSON."""
    assert isinstance(exc, HTTPException)
    name = HTTP_ERROR_NAMES.get(exc.status_code) or HTTPStatus(exc.status_code).phrase.replace(" ", "")
    path = clipped("/".join(map(masked, request.url.path.split("/"))))  # a token in the path is not sent back
    message = {
        404: f"no such endpoint: {request.method} {path}; see GET /openapi.json for the endpoints",
        405: f"{request.method} is not allowed on {path}; allowed: "
        + (exc.headers or {}).get("Allow", "see GET /openapi.json"),
        413: "the request body is larger than 11 MB, 64 MB for an import (a memory's content may take at most 10 MB); send less",
    }.get(exc.status_code, exc.detail)
    return error_response(exc.status_code, name, message, dict(exc.headers or {}))


async def on_disconnect(request: Request, exc: Exception) -> Response:
    """The client went away before its body was all there: nobody reads an answer, nothing was done
    (no Vault call starts before the whole body is read), and it is no bug to log."""
    return error_response(400, "ClientDisconnect", "the client closed the connection before its body was complete")


async def on_bug(request: Request, exc: Exception) -> Response:
    """Anything else: a 500 with no traceback (Starlette raises the exception again afterwards, and
    uvicorn logs it with its traceback on stderr)."""
    return error_response(500, "InternalError", BUG_MESSAGE)


EXCEPTION_HANDLERS = {
    MemfileError: on_memfile_error,
    HTTPException: on_http_error,
    ClientDisconnect: on_disconnect,
    Exception: on_bug,
}
