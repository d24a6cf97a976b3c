"""An OpenAI-compatible chat-completions API on a loopback port, standing in for a model (none is reachable
from the test machine): each POST is answered as the test says (`ChatServer.answer`, one of the answers
below: a completion, an error, a server that never answers or trickles, an answer too large), and every
request is recorded as it arrived (path, headers, JSON body).

    with ChatServer() as chat:
        chat.answer = completion('{"memories": []}')
        ChatEndpoint(chat.url, "qwen")("system", "user")
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Seen:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]  # names lowercased
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


#: What the server does with a request: writes its answer (or none) through the handler.
Answer = Callable[["_Handler"], None]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self._answer()

    def do_GET(self) -> None:  # noqa: N802
        self._answer()

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        chat = self.server.chat
        chat.requests.append(Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        chat.answer(self)

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    chat: ChatServer

    def handle_error(self, request: object, client_address: object) -> None:
        """A client gone mid-answer is what the misbehaving answers test, not an error to print."""


class ChatServer:
    """The API at `url` (`http://127.0.0.1:PORT/v1`, the base URL a person configures)."""

    def __init__(self) -> None:
        self.requests: list[Seen] = []
        self.answer: Answer = completion("[]")
        self.stop = threading.Event()  # ends the answers that wait or trickle
        self.left = threading.Event()  # a trickling answer found the client gone
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.chat = self
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


def reply(status: int, body: bytes | dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
    """An answer with this status, body (a dict is sent as JSON) and headers."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body

    def answer(handler: _Handler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json" if isinstance(body, dict) else "text/html")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    return answer


def completion(content: str | None) -> Answer:
    """A chat completion whose one choice's message holds `content`, as llama.cpp's server and OpenAI send it."""
    return reply(
        200,
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1767225600,
            "model": "qwen2.5-7b-instruct",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        },
    )


def openai_error(status: int, message: str, kind: str = "invalid_request_error") -> Answer:
    """An error answer in OpenAI's shape (llama.cpp's and Ollama's are the same)."""
    return reply(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})


def silent(handler: _Handler) -> None:
    """Never answers: holds the connection until the server stops."""
    handler.server.chat.stop.wait()


def _trickle(handler: _Handler, head: bytes) -> None:
    chat = handler.server.chat
    try:
        handler.wfile.write(head)
        while not chat.stop.wait(0.05):
            handler.wfile.write(b"a")
            handler.wfile.flush()
    except OSError:
        chat.left.set()


def trickling_headers(handler: _Handler) -> None:
    """A header that never ends, a byte every 50 ms: no single read ever waits long."""
    _trickle(handler, b"HTTP/1.1 200 OK\r\nX-Slow: ")


def trickling_body(handler: _Handler) -> None:
    """Headers at once, then a body of a megabyte a byte every 50 ms."""
    _trickle(handler, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")


def huge(size: int, *, chunked: bool) -> Answer:
    """An answer of `size` bytes: with its Content-Length, or chunked without one (read to find its size)."""

    def answer(handler: _Handler) -> None:
        if not chunked:
            reply(200, b"x" * size)(handler)
            return
        handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        piece = b"x" * 65536
        try:
            for _ in range(size // len(piece) + 1):
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client stopped reading at its cap
            handler.server.chat.left.set()

    return answer
