"""The built-in extractor of `Vault.capture`: one OpenAI-compatible chat-completions endpoint (llama.cpp's
server, Ollama, a hosted API), called with the standard library only.

`ChatEndpoint(url, model)` is the `extract(system, user) -> str` capture takes; `ChatEndpoint.from_config`
makes one of memfile.toml's `[capture]` table, the key read from the environment variable `api_key_env`
names (a key is never written into the vault). A call is bounded in every way: one deadline for all of it
(a name lookup, a connect, a server that trickles a byte a second: the caller has its answer or an error
by `timeout`), an answer of at most `MAX_ANSWER_BYTES`, and no redirect followed (a key only ever goes
where it was sent). Every failure is one `ExtractorFailed` naming the endpoint (never a credential nor a
query), the HTTP status and the server's own words cut short, never the key.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from ._version import __version__
from .config import DEFAULT_CAPTURE_TIMEOUT, Config, checked_setting, without_userinfo
from .errors import ExtractorFailed, ExtractorNotConfigured, InvalidInput, masked

#: The largest answer read (a chat completion of a few memories is a few KB).
MAX_ANSWER_BYTES = 4 * 1024 * 1024
#: The most of an error answer read for the server's words, and the most of them a message repeats.
MAX_ERROR_BYTES = 64 * 1024
REASON_LIMIT = 200
CHAT_PATH = "/chat/completions"

#: How to configure an extractor, as the error says it when memfile.toml configures none.
HOW_TO_CONFIGURE = (
    "name an OpenAI-compatible chat-completions API and the model it serves under [capture] in memfile.toml, "
    'for llama.cpp\'s llama-server: endpoint = "http://127.0.0.1:8080/v1" and model = "qwen2.5-7b-instruct"; '
    'for Ollama: endpoint = "http://127.0.0.1:11434/v1" and model = "llama3.2"; a hosted API also takes '
    'api_key_env = "OPENAI_API_KEY", the name of the environment variable that holds its key (never the key '
    "itself); see docs/capture.md"
)
#: What to do after an HTTP error, by status (5xx: the server failed).
_ADVICE = {
    400: "the server refused the request: check that model names a model it serves",
    401: "check the key in the variable api_key_env names under [capture]",
    403: "check the key in the variable api_key_env names under [capture], and what it may use",
    404: "check endpoint (it usually ends in /v1) and that the server serves the model named under [capture]",
    429: "the endpoint limits how often it may be called: capture again later",
}


class ChatEndpoint:
    """An OpenAI-compatible chat-completions endpoint as capture's `extract(system, user) -> str`.

    Args:
        url: the API's base URL (`http://127.0.0.1:8080/v1`) or its `.../chat/completions` URL; http or https.
        model: the model the endpoint is asked for.
        api_key: sent as `Authorization: Bearer KEY` when given; never shown (repr, errors).
        timeout: seconds one call may take in all (above 0, at most 600).

    Raises:
        InvalidInput: a URL, model, key or timeout that cannot be used (the key itself is never shown).
    """

    def __init__(
        self, url: str, model: str, api_key: str | None = None, timeout: float = DEFAULT_CAPTURE_TIMEOUT
    ) -> None:
        parts = urllib.parse.urlsplit(checked_setting("capture", "endpoint", url))
        base = parts.path.rstrip("/")
        parts = parts._replace(path=base if base.endswith(CHAT_PATH) else base + CHAT_PATH)
        self.url = urllib.parse.urlunsplit(parts)
        #: The URL as messages name it: no query (it may carry a token).
        self.shown_url = urllib.parse.urlunsplit(parts._replace(query=""))
        self.model: str = checked_setting("capture", "model", model)
        self.timeout: float = checked_setting("capture", "timeout", timeout)
        if api_key is not None and not (
            isinstance(api_key, str) and api_key.isascii() and api_key.isprintable() and api_key.strip()
        ):
            raise InvalidInput("api_key", "(not shown)", "a key of printable ASCII characters")
        self._api_key = api_key.strip() if api_key else None

    def ask(self, messages: object) -> str:
        """The model's answer for a conversation, asked as `Vault.capture` asks (`memfile.capture.PROMPT` and
        the numbered transcript): for a resident face, which asks it off its worker thread and hands the
        answer to `Vault.capture`.

        Raises:
            InvalidInput: the messages are not a conversation. ExtractorFailed: as calling it.
        """
        from .capture import PROMPT, transcript

        return self(PROMPT, transcript(messages))

    @classmethod
    def from_config(cls, config: Config, environ: Mapping[str, str] = os.environ) -> ChatEndpoint:
        """The endpoint memfile.toml's `[capture]` table configures, its key read from `environ`.

        Raises:
            ExtractorNotConfigured: (exit 2) no endpoint or no model is configured, or the variable
                `api_key_env` names is not set; the message says how to configure one.
        """
        missing = [key for key in ("endpoint", "model") if getattr(config, f"capture_{key}") is None]
        if missing:
            raise ExtractorNotConfigured(
                f"no extractor is configured: memfile.toml's [capture] table names no {' and no '.join(missing)}; "
                f"{HOW_TO_CONFIGURE}"
            )
        name = config.capture_api_key_env
        key = environ.get(name, "").strip() if name else None
        if name and not key:
            raise ExtractorNotConfigured(
                f"[capture] api_key_env in memfile.toml names the environment variable {name}, which is not set "
                f"(or empty) here; set it to the endpoint's key (export {name}=...), or remove api_key_env "
                "for an endpoint that takes no key"
            )
        return cls(config.capture_endpoint, config.capture_model, key, config.capture_timeout)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        key = ", api_key=(not shown)" if self._api_key else ""
        return f"ChatEndpoint({self.shown_url!r}, {self.model!r}{key}, timeout={self.timeout:g})"

    def __call__(self, system: str, user: str) -> str:
        """The model's reply to one system and one user message, at temperature 0.

        Raises:
            ExtractorFailed: (exit 9) no answer within the timeout, an HTTP error, a redirect, an answer
                over MAX_ANSWER_BYTES or one that holds no `choices[0].message.content`.
        """
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        body = json.dumps({"model": self.model, "messages": messages, "temperature": 0}).encode()
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"memfile/{__version__}",
        }
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        call = _Call(urllib.request.Request(self.url, data=body, headers=headers, method="POST"), self.timeout)
        worker = threading.Thread(target=call.run, name="memfile-extractor", daemon=True)
        worker.start()
        if not call.done.wait(self.timeout):
            call.abandon()
            raise self._failed(None, f"no complete answer within {self.timeout:g} s ([capture] timeout)")
        if isinstance(call.error, OSError | http.client.HTTPException):
            raise self._failed(None, self._why(call.error))
        if call.error is not None:  # a bug: said as it is
            raise call.error
        status, location, data = call.answer
        if 300 <= status < 400:
            where = f" to {_shown(location)}" if location else ""
            raise self._failed(
                status,
                f"a redirect{where}, which memfile never follows (a key goes only where it was sent); "
                "set endpoint under [capture] to the URL that answers",
            )
        if status >= 400:
            says = self._server_says(data)
            advice = _ADVICE.get(status) or ("the server failed: its log says why; capture again later")
            raise self._failed(status, f"{says}; {advice}")
        if data is None:
            raise self._failed(status, f"the answer is larger than {MAX_ANSWER_BYTES // (1024 * 1024)} MB")
        return self._content(status, data)

    def _failed(self, status: int | None, reason: str) -> ExtractorFailed:
        return ExtractorFailed(self.shown_url, self._scrubbed(reason), status=status)

    def _scrubbed(self, text: str) -> str:
        """`text` without the key, whatever a server repeats of it."""
        return text.replace(self._api_key, "(key not shown)") if self._api_key else text

    def _why(self, error: BaseException) -> str:
        """A failure before any answer, in a person's words."""
        reason = error.reason if isinstance(error, urllib.error.URLError) else error
        if isinstance(reason, TimeoutError):
            return f"no answer within {self.timeout:g} s ([capture] timeout)"
        if isinstance(reason, ConnectionRefusedError):
            return (
                "the connection was refused: start the server, or check the host and port of endpoint under [capture]"
            )
        if isinstance(reason, socket.gaierror):
            return "its host name cannot be resolved: check endpoint under [capture]"
        if isinstance(reason, ssl.SSLError):
            return f"the TLS connection failed ({_cut(str(reason))}): check the server's certificate"
        if isinstance(error, http.client.RemoteDisconnected):
            return "the server closed the connection without an answer"
        if isinstance(error, http.client.HTTPException):
            return (
                f"the answer is not HTTP ({type(error).__name__}): check that endpoint under [capture] is the API's URL"
            )
        return f"the connection failed ({_cut(str(reason)) or type(reason).__name__})"

    def _server_says(self, data: bytes | None) -> str:
        """The server's own error message (OpenAI's `{"error": {"message": ...}}`, or the body), cut short."""
        text = (data or b"").decode("utf-8", "replace")
        try:
            found: Any = json.loads(text)
        except (ValueError, RecursionError):
            found = text
        for name in ("error", "message", "detail"):
            if isinstance(found, dict) and found.get(name):
                found = found[name]
        words = _cut(self._scrubbed(found if isinstance(found, str) else text))
        return f'the server says "{words}"' if words else "the server gave no reason"

    def _content(self, status: int, data: bytes) -> str:
        """`choices[0].message.content` of a chat completion."""
        try:
            answer = json.loads(data)
        except (ValueError, RecursionError):
            raise self._failed(
                status,
                f'the answer is not JSON ("{_cut(self._scrubbed(data.decode("utf-8", "replace")))}"): '
                "check that endpoint under [capture] is an OpenAI-compatible API",
            ) from None
        try:
            content = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            error = answer.get("error") if isinstance(answer, dict) else None
            what = (
                self._server_says(data)
                if error
                else f"the answer holds no text at choices[0].message.content ({_outline(answer)})"
            )
            raise self._failed(
                status, f"{what}; check that endpoint under [capture] is an OpenAI-compatible chat-completions API"
            )
        return content


class _Call:
    """One request on a thread of its own, so that the caller waits at most the deadline whatever blocks;
    at the deadline its sockets are shut down, which ends the thread's reads at once."""

    def __init__(self, request: urllib.request.Request, timeout: float) -> None:
        self.request, self.timeout = request, timeout
        self.done = threading.Event()
        self.answer: tuple[int, str | None, bytes | None] = (0, None, None)  # status, Location, body (None: too large)
        self.error: BaseException | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._abandoned = False

    def run(self) -> None:
        opener = urllib.request.OpenerDirector()
        context = ssl.create_default_context()
        # No redirect handler: a 3xx is an answer like a 4xx (HTTPDefaultErrorHandler).
        for handler in (
            urllib.request.ProxyHandler(),
            _PlainHandler(self),
            _SecureHandler(self, context=context),
            urllib.request.HTTPDefaultErrorHandler(),
            urllib.request.HTTPErrorProcessor(),
        ):
            opener.add_handler(handler)
        try:
            with opener.open(self.request, timeout=self.timeout) as response:
                self.answer = (response.status, None, _read(response, MAX_ANSWER_BYTES))
        except urllib.error.HTTPError as exc:
            with exc:
                self.answer = (exc.code, exc.headers.get("Location"), exc.read(MAX_ERROR_BYTES))
        except Exception as exc:  # the caller tells a failure from a bug
            self.error = exc
        finally:
            self.done.set()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self._abandoned:
                _shut(sock)

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # closed meanwhile
        pass


def _read(response: http.client.HTTPResponse, limit: int) -> bytes | None:
    """The body, or None when it is larger than `limit` (a Content-Length saying so is not read)."""
    length = response.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > limit:
        return None
    data = response.read(limit + 1)
    return data if len(data) <= limit else None


class _WatchedConnection(http.client.HTTPConnection):
    """A connection whose socket the call shuts down at its deadline (watched as soon as it is connected,
    before a TLS handshake)."""

    call: _Call

    def connect(self) -> None:
        super().connect()
        self.call.watch(self.sock)


class _WatchedTLSConnection(http.client.HTTPSConnection, _WatchedConnection):
    """HTTPS: HTTPSConnection.connect wraps the socket `_WatchedConnection.connect` made and watched."""


def _watched(kind: type[_WatchedConnection], call: _Call) -> Any:
    """What urllib's `do_open` makes a connection with: one of `kind`, watched by `call`."""

    def connection(*args: Any, **kwargs: Any) -> _WatchedConnection:
        made = kind(*args, **kwargs)
        made.call = call
        return made

    return connection


class _PlainHandler(urllib.request.HTTPHandler):
    def __init__(self, call: _Call) -> None:
        super().__init__()
        self.call = call

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(_WatchedConnection, self.call), req)


class _SecureHandler(urllib.request.HTTPSHandler):
    def __init__(self, call: _Call, context: ssl.SSLContext) -> None:
        super().__init__(context=context)
        self.call, self.context = call, context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(_WatchedTLSConnection, self.call), req, context=self.context)


def _shown(url: str) -> str:
    """A URL as a message names it: no user:password@, no query, no fragment."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return _cut(without_userinfo(url).split("?")[0])
    return _cut(without_userinfo(urllib.parse.urlunsplit(parts._replace(query="", fragment=""))))


def _cut(text: str) -> str:
    """`text` on one line, without control characters, secrets masked, at most REASON_LIMIT characters."""
    line = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    line = masked(line)
    return line if len(line) <= REASON_LIMIT else line[:REASON_LIMIT] + "\u2026"


def _outline(answer: object) -> str:
    """What an answer holds instead of a chat completion, in a few words."""
    if isinstance(answer, dict):
        return "its keys: " + _cut(", ".join(map(str, answer))) if answer else "an empty object"
    return f"a JSON {type(answer).__name__}"
