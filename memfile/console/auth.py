"""Who may use the console, and the rules every console answer keeps: sessions, CSRF, same origin, headers.

A person logs in once with their token; the console keeps a `Session` in this process (a random id in
an `HttpOnly; SameSite=Strict; Path=/console` cookie, never the token) for `SESSION_HOURS`, and a
revoked key ends its sessions. A Mind Key never opens one. Every state-changing request is a POST
carrying the session's CSRF token and coming from this server's own origin (Origin, else Referer).
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import InvalidInput, NotFound, Refused
from ..keys import AGENT

if TYPE_CHECKING:
    from ..keys import Key, KeyStore

CONSOLE_PREFIX = "/console"
#: The session cookie's name (its value is a random id; the token is never in a cookie).
COOKIE = "memfile_console"
SESSION_HOURS = 12
#: Sessions kept at most (the oldest go first): only a person's token makes one.
MAX_SESSIONS = 1000
#: Uploaded import files one session keeps at most (each until it is applied or discarded).
MAX_UPLOADS = 3
#: The sentence a Mind Key hears on every console page.
MIND_KEY_REFUSED = (
    "the console is for a person; a Mind Key is an agent's credential: log in with a person's token "
    "(make one with: memfile key add --person --name LABEL)"
)
#: Every console answer carries these headers: nothing but this server's own files runs or loads.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


@dataclass(frozen=True)
class Upload:
    """An import file a person uploaded, kept until its plan is applied or discarded, for the one mind
    whose plan was shown."""

    data: bytes
    name: str  # what the file is called in the commit and the messages
    format: str | None
    on_conflict: str
    mind: str  # the mind it was planned for: it is applied there only


@dataclass
class Session:
    """A person's console session: who logged in, its CSRF token, flash messages and uploads."""

    key_id: str
    label: str
    expires: float  # time.monotonic()
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    flashes: list[str] = field(default_factory=list)
    uploads: dict[str, Upload] = field(default_factory=dict)

    def flash(self, message: str) -> None:
        self.flashes.append(message)

    def take_flashes(self) -> list[str]:
        taken, self.flashes = self.flashes, []
        return taken

    def keep_upload(self, upload: Upload) -> str:
        """Keep an uploaded file under a new random id (the oldest goes past MAX_UPLOADS)."""
        while len(self.uploads) >= MAX_UPLOADS:
            self.uploads.pop(next(iter(self.uploads)))
        upload_id = secrets.token_urlsafe(16)
        self.uploads[upload_id] = upload
        return upload_id

    def take_upload(self, upload_id: object, mind: str) -> Upload:
        """The kept upload `upload_id`, no longer kept, to apply or discard in `mind` (one planned for another
        mind stays kept for that one: InvalidInput, nothing is done)."""
        if not isinstance(upload_id, str) or upload_id not in self.uploads:
            raise NotFound("that upload is no longer kept (applied, discarded or logged out); upload it again")
        kept = self.uploads[upload_id]
        if kept.mind != mind:
            raise InvalidInput(
                "upload",
                kept.name,
                f"an upload planned for the mind {mind!r}",
                reason=f"it was planned for the mind {kept.mind!r}; apply it on that mind's Export / import "
                "page, or upload it here for a plan of this mind; nothing was imported",
            )
        del self.uploads[upload_id]
        return kept


class Sessions:
    """The console's sessions, in this process only (a restart logs everyone out)."""

    def __init__(self, keys: KeyStore, root: Path) -> None:
        self.keys = keys
        self.root = root
        self._sessions: dict[str, Session] = {}

    def open(self, key: Key) -> tuple[str, Session]:
        """A new session for a person's key (a Mind Key is refused): (its cookie value, the session)."""
        if key.kind == AGENT:
            raise Refused(MIND_KEY_REFUSED)
        now = time.monotonic()
        for session_id in [sid for sid, s in self._sessions.items() if s.expires <= now]:
            del self._sessions[session_id]
        while len(self._sessions) >= MAX_SESSIONS:
            self._sessions.pop(next(iter(self._sessions)))
        session_id = secrets.token_urlsafe(32)
        session = Session(key.id, key.label, now + SESSION_HOURS * 3600)
        self._sessions[session_id] = session
        return session_id, session

    def find(self, session_id: str | None) -> Session | None:
        """The live session of a cookie value: not expired, and its key not revoked since; else None."""
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if session.expires <= time.monotonic() or all(key.id != session.key_id for key in self.keys.list(self.root)):
            self._sessions.pop(session_id, None)
            return None
        return session

    def close(self, session_id: str | None) -> None:
        """End a session (logout); its uploads go with it."""
        if session_id:
            self._sessions.pop(session_id, None)


def cookie_header(request: Request, session_id: str, max_age: int) -> str:
    """The Set-Cookie value of a session (max_age 0: the cookie is removed), `Secure` when the browser
    reached the server over https (itself, or through a proxy `--forwarded-allow-ips` names)."""
    secure = "; Secure" if request.url.scheme == "https" else ""
    return f"{COOKIE}={session_id}; Path={CONSOLE_PREFIX}; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}"


def check_same_origin(request: Request) -> None:
    """A state-changing request must come from a page of this server: Refused when the Origin header (else
    the Referer) names another origin, or neither is sent."""
    origin = request.headers.get("origin")
    own = f"{request.url.scheme}://{request.headers.get('host', '').lower()}"  # as the browser sees it (Host checked)
    if origin is not None:
        if origin.lower() != own:
            raise Refused(
                f"this form was sent from another site ({origin[:200]}), not from {own}; nothing was done"
                + _proxy_hint(origin, own)
            )
        return
    referer = request.headers.get("referer")
    if referer is None:
        raise Refused(
            "the browser sent neither Origin nor Referer, so the console cannot tell this form came from its "
            "own page; nothing was done (allow the Referer for this site)"
        )
    parts = urlsplit(referer)
    seen = f"{parts.scheme}://{parts.netloc}"
    if seen.lower() != own:
        raise Refused(f"this form was sent from another page ({seen}), not from {own}" + _proxy_hint(seen, own))


def _proxy_hint(seen: str, own: str) -> str:
    """What to do when a page of https://NAME posts to a server that takes itself for http://NAME: a TLS
    proxy the server does not believe."""
    if own.startswith("http://") and seen.lower() == "https://" + own.removeprefix("http://"):
        return " (behind a TLS proxy, start memfile serve with --forwarded-allow-ips naming the proxy's address)"
    return ""


def check_csrf(session: Session, given: object) -> None:
    """The form's CSRF token must be the session's."""
    if not isinstance(given, str) or not given:
        raise Refused("the form carried no CSRF token; reload the page and try again (nothing was done)")
    if not hmac.compare_digest(given.encode(), session.csrf.encode()):
        raise Refused("the form's CSRF token is not this session's; reload the page and try again (nothing was done)")


class ConsoleMount:
    """Hands /console and everything under it to the console's application; the rest to the API (whose
    Bearer check, `memfile.server.auth.Authenticate`, never sees a console request: the console checks its cookie)."""

    def __init__(self, app: ASGIApp, console: ASGIApp) -> None:
        self.app, self.console = app, console

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/")):
            await self.console(scope, receive, send)
        else:
            await self.app(scope, receive, send)


class SecurityHeaders:
    """Puts SECURITY_HEADERS on every answer (pages, files, errors), and `Cache-Control: no-store` on
    everything but the static files (pages hold memories)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = scope["path"].startswith(CONSOLE_PREFIX + "/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                if not static:
                    headers["Cache-Control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)
