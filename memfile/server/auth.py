"""Who may ask, checked before anything else: the Host header, the body's declared size, the credential.

`TrustedHosts` refuses a Host header naming another server (DNS rebinding), `Guard` a Content-Length
over the limit, and `Authenticate` turns `Authorization: Bearer TOKEN` into the request's `Caller`
(401 without one). Tokens are read from the header only and never written anywhere.
"""

from __future__ import annotations

import ipaddress
import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from starlette.datastructures import Headers, QueryParams
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import AmbiguousMind
from ..errors import InvalidInput, MemfileError, NotFound, Refused, echo
from ..keys import AGENT
from ..model import Source
from ..worker import Caller
from .errors import KeysUnusable, Unauthorized, error_response, memfile_error_response

if TYPE_CHECKING:
    from ..keys import KeyStore
    from ..worker import Minds

#: Where the authentication middleware puts the request's Caller (the /mcp mount reads it there too).
CALLER = "memfile.caller"
#: The largest request body taken, in bytes: a memory's content may take 10 MB, and JSON escapes add some.
MAX_BODY_BYTES = 11 * 1024 * 1024
#: The import's body is a whole export file.
MAX_IMPORT_BODY_BYTES = 64 * 1024 * 1024
IMPORT_PATH = "/memory/import"
#: The console's import form (a whole export file, uploaded): the same limit as IMPORT_PATH.
CONSOLE_IMPORT_PATH = re.compile(r"/console/m/[^/]+/transfer")
#: The endpoints answered without a credential: liveness and the API's description, neither says
#: anything about the vault.
PUBLIC_PATHS = frozenset({"/health", "/openapi.json"})
#: The host names a loopback server answers to, besides IP addresses.
LOOPBACK_NAMES = ("localhost",)
#: A Host header that may be an IP address: a bracketed IPv6 one or digits and dots, and a port or none.
IP_HOST = re.compile(r"(?:\[([0-9A-Fa-f:.]+)\]|([0-9.]+))(?::[0-9]{1,5})?")
#: Where `TrustedHosts` marks a request whose Host header TrustedHostMiddleware took.
HOST_TAKEN = "memfile.host_taken"
#: The query parameter that names a mind (a person's token; a Mind Key may only name its own).
MIND_PARAMETER = "mind"


def is_ip_host(header: str | None) -> bool:
    match = IP_HOST.fullmatch(header or "")
    try:
        return match is not None and bool(ipaddress.ip_address(match.group(1) or match.group(2)))
    except ValueError:
        return False


class TrustedHosts:
    """The Host allow-list: Starlette's TrustedHostMiddleware decides for a name (`allowed_hosts`, any
    case, any port); an IP address is always taken (DNS rebinding needs a name, and an address reaches
    this server only if it listens there). A refusal is answered in the API's shape, 421
    MisdirectedRequest, in place of TrustedHostMiddleware's plain-text 400."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str]) -> None:
        self.app = app
        self.names = sorted({name.lower().strip("[]") for name in allowed_hosts})
        # A `*` would be a wildcard to Starlette: a name given with it is taken literally, so matches no host.
        literal = [name for name in self.names if "*" not in name]
        self.check = TrustedHostMiddleware(self.taken, literal, www_redirect=False)

    @staticmethod
    async def taken(scope: Scope, receive: Receive, send: Send) -> None:
        scope[HOST_TAKEN] = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not is_ip_host(Headers(scope=scope).get("host")):
            await self.check(scope, receive, _unsent)
            if not scope.pop(HOST_TAKEN, False):
                allowed = ", ".join(self.names) + " or an IP address"
                response = error_response(
                    421,
                    "MisdirectedRequest",
                    f"this server does not answer to the host name in the request's Host header; allowed: {allowed} "
                    "(a page of another site that points its name here is refused)",
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _unsent(message: Message) -> None:
    """Where TrustedHostMiddleware's own refusal goes: nowhere (`TrustedHosts` answers in the API's shape)."""


class Guard:
    """Refuses a request with a declared body over the limit (413) before the body is read; a body sent
    without a length is counted as it comes in (Starlette's RequestBodyLimitMiddleware, further in)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = Headers(scope=scope).get("content-length")
        path = scope["path"]
        whole_file = path == IMPORT_PATH or CONSOLE_IMPORT_PATH.fullmatch(path) is not None
        limit = MAX_IMPORT_BODY_BYTES if whole_file else MAX_BODY_BYTES
        if length is not None and (not length.isdigit() or int(length) > limit):
            why = "an import file" if limit == MAX_IMPORT_BODY_BYTES else "a memory's content may take at most 10 MB"
            response = error_response(
                413,
                "ContentTooLarge",
                f"the request body ({length} bytes) is larger than {limit // (1024 * 1024)} MB ({why}); send less",
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class Authenticate:
    """Sets `scope["memfile.caller"]` from the request's credential, or answers 401 (403 for a Mind Key
    that names another mind); the public paths pass without one (the console's never come here:
    `ConsoleMount` hands them to the console, which checks its own session cookie)."""

    def __init__(self, app: ASGIApp, minds: Minds, keys: KeyStore) -> None:
        self.app, self.minds, self.keys = app, minds, keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        try:
            scope[CALLER] = self.caller(Headers(scope=scope), QueryParams(scope["query_string"]))
        except MemfileError as exc:
            await memfile_error_response(exc)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def caller(self, headers: Headers, query: QueryParams) -> Caller:
        """The Caller of a request with these headers and query (Unauthorized: no credential the keys file
        holds; Refused: a Mind Key names another mind; NotFound, AmbiguousMind: a person's token names no mind
        of the vault, or none in a vault of several minds; InvalidInput: a header or `?mind=` given twice)."""
        token = bearer_token(headers)
        if token is None:
            raise Unauthorized(
                "this endpoint needs a credential: send the header Authorization: Bearer TOKEN with a Mind Key "
                "or a person's token (make one on the server's machine with: memfile key add --mind NAME --name LABEL)"
            )
        try:
            key = self.keys.authenticate(token, self.minds.root)
        except MemfileError as exc:  # the keys file cannot be trusted: no key is taken, the server's owner is told
            print(f"memfile serve: error: {exc}", file=sys.stderr, flush=True)
            raise KeysUnusable(
                "the server cannot check credentials now: its keys file cannot be used "
                "(the server's log says why); nothing was done"
            ) from None
        if key is None:
            raise Unauthorized(
                "the credential was not accepted: it is unknown to this vault, or was revoked; "
                "see the keys with: memfile key list"
            )
        if key.kind == AGENT:  # a Mind Key: its own mind, as an agent, and no word of any other
            assert key.mind is not None
            asked = self.named_mind(query)
            if asked is not None and asked != key.mind:
                # The same answer whether the mind named exists or not, and it names no other mind.
                raise Refused(
                    f"this Mind Key ({key.label}) reaches only its own mind, {key.mind!r}; "
                    "leave out ?mind=, or use a key of the mind you named"
                )
            return Caller(key.mind, Source.AGENT, key.label)
        asked = self.asked_mind(query)
        if asked is None:
            try:
                asked = self.minds.default_mind()
            except AmbiguousMind:
                raise AmbiguousMind(
                    f"the vault has several minds ({', '.join(self.minds.mind_names())}); name one with ?mind=NAME"
                ) from None
        return Caller(asked, Source.USER, key.label)

    @staticmethod
    def named_mind(query: QueryParams) -> str | None:
        """The name `?mind=` gives, whether or not the vault has such a mind; None without one."""
        values = query.getlist(MIND_PARAMETER)
        if len(values) > 1:
            raise InvalidInput("mind", ", ".join(values), "one ?mind=NAME", reason="it is given more than once")
        return values[0] if values else None

    def asked_mind(self, query: QueryParams) -> str | None:
        """The mind `?mind=` names (one of the vault's mind folders), or None; for a person's token only (the
        message lists the vault's minds)."""
        asked = self.named_mind(query)
        if asked is None:
            return None
        names = self.minds.mind_names()
        if asked not in names:
            raise NotFound(
                f"no mind {echo(asked)} in this vault (minds: {', '.join(names) or 'none'}); name one of them with ?mind="
            )
        return asked


def bearer_token(headers: Headers) -> str | None:
    """The token of the request's `Authorization: Bearer TOKEN` header; None without one (or another scheme).
    A header sent twice is refused: no credential is taken, not even the first."""
    given = headers.getlist("authorization")
    if len(given) > 1:
        raise InvalidInput(
            "Authorization header",
            f"sent {len(given)} times",
            "one Authorization: Bearer TOKEN header",
            reason="a request carries one credential; nothing was done",
        )
    scheme, _, token = (given[0] if given else "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()
