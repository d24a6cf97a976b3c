"""What the `memfile serve` tests share: a vault with two minds and keys, a real server process, a real client.

(Not a test module: pytest collects no test here.)
"""

from __future__ import annotations

import http.client
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import DEADLINE
from memfile import Vault
from memfile.keys import AGENT, PERSON, KeyStore

#: The memfile variables conftest sets for the whole run, kept: no resident reader is left behind by a read
#: (tests/server/test_resident.py drops MEMFILE_NO_RESIDENT), and the run's mark, by which the session's end finds one.
KEPT = ("MEMFILE_NO_RESIDENT", "MEMFILE_TEST_RUN")


def server_env(home: Path) -> dict[str, str]:
    """The environment of a server process: no git identity, no memfile variables (but KEPT), a home of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMFILE_", "GIT_", "XDG_")) or k in KEPT}
    env |= {"HOME": str(home), "GIT_CONFIG_GLOBAL": str(home / "no-gitconfig"), "GIT_CONFIG_NOSYSTEM": "1"}
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class Setup:
    """A vault (minds michael, the default, and anna) and its keys file with one key of each kind."""

    root: Path
    keys_path: Path
    home: Path
    tokens: dict[str, str] = field(default_factory=dict)  # michael (agent), anna (agent), person, revoked
    ids: dict[str, str] = field(default_factory=dict)


def make_setup(base: Path) -> Setup:
    home = base / "home"
    home.mkdir(parents=True)
    old = os.environ.get("GIT_CONFIG_GLOBAL"), os.environ.get("GIT_CONFIG_NOSYSTEM")
    os.environ["GIT_CONFIG_GLOBAL"], os.environ["GIT_CONFIG_NOSYSTEM"] = str(home / "no-gitconfig"), "1"
    try:
        root = base / "vault"
        Vault.init(root, "michael", "Michael's Mind").close()
        Vault.init(root, "anna").close()
    finally:
        for name, value in zip(("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM"), old):
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    setup = Setup(root.resolve(), base / "config" / "keys.toml", home)
    keys = KeyStore(setup.keys_path)
    for name, kind, mind in (
        ("michael", AGENT, "michael"),
        ("anna", AGENT, "anna"),
        ("person", PERSON, None),
        ("revoked", AGENT, "michael"),
    ):
        key, token = keys.add(kind, f"{name}-key", root, mind)
        setup.tokens[name], setup.ids[name] = token, key.id
    return setup


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        assert self.headers.get("content-type", "").startswith("application/json"), (self.status, self.body[:300])
        return json.loads(self.body)

    @property
    def error(self) -> str:
        return self.json()["error"]


@dataclass
class Server:
    """A running `memfile serve` process."""

    process: subprocess.Popen[str]
    url: str
    host: str = ""
    port: int = 0
    lines: list[str] = field(default_factory=list)

    def connection(self, timeout: float = DEADLINE, source: str | None = None) -> http.client.HTTPConnection:
        """A connection to the server, from the address `source` (say 127.0.0.2) when given."""
        return http.client.HTTPConnection(
            self.host, self.port, timeout=timeout, source_address=(source, 0) if source else None
        )

    def request(
        self,
        method: str,
        path: str,
        token: str | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        source: str | None = None,
    ) -> Answer:
        """One request on a connection of its own (from `source`, see `connection`); `body` is JSON-encoded
        unless it is bytes or str."""
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        data = body if isinstance(body, bytes | str | None) else json.dumps(body)
        if isinstance(data, str):
            data = data.encode("utf-8")
        conn = self.connection(source=source)
        try:
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
        finally:
            conn.close()

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str, str]:
        """Signal the server and wait for it to end: (exit code, the rest of stdout, stderr)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        out, err = self.process.communicate(timeout=DEADLINE)
        return self.process.returncode, out, err


def start_server(setup: Setup, *args: str, expect_ready: bool = True) -> Server:
    """`memfile --vault ROOT serve --port 0 --keys FILE ARGS`, once it printed that it serves."""
    command = [sys.executable, "-m", "memfile", "--vault", str(setup.root), "serve", "--keys", str(setup.keys_path)]
    if not any(a in ("--port", "--uds") for a in args):
        command += ["--port", "0"]
    process = subprocess.Popen(
        [*command, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(setup.home),
    )
    line = read_line(process, DEADLINE)
    if "serving" not in line:
        process.kill()
        out, err = process.communicate(timeout=DEADLINE)
        raise AssertionError(f"the server did not start: {line!r} {out!r} {err!r}")
    url = line.split("serving ", 1)[1].split(" ", 1)[0]
    server = Server(process, url, lines=[line])
    if url.startswith("http://"):
        host, _, port = url.removeprefix("http://").rpartition(":")
        server.host, server.port = host.strip("[]"), int(port)
    return server


def read_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The next line of the process's stdout, or '' when it ended (or the deadline passed)."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return process.stdout.readline()


def refuses_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return False
    except OSError:
        return True


def read_answer(sock: socket.socket) -> bytes:
    """What the server sent until it closed or the response is complete (Content-Length)."""
    data = b""
    while True:
        try:
            part = sock.recv(65536)
        except ConnectionResetError:
            break
        if not part:
            break
        data += part
        head, _, rest = data.partition(b"\r\n\r\n")
        length = [line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
        if length and len(rest) >= int(length[0].split(b":")[1]):
            break
    return data


@contextmanager
def serving(setup: Setup, *args: str) -> Iterator[Server]:
    """A server for a module's tests, which must stop cleanly when they are done (exit 0, no traceback)."""
    served = start_server(setup, *args)
    yield served
    code, _, err = served.stop()
    assert code == 0 and "Traceback" not in err, err
