"""What the tests of the command line's fast path share (tests/test_cli_fast_path.py): `memfile` as a real
process, run through a vault's server or in process, a listener that only pretends to be a server, and
the frames of the socket spoken by hand.

(Not a test module: pytest collects no test here.)
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.serve import DEADLINE, Setup, server_env
from memfile import Vault, __version__
from memfile.cli_client import PROTOCOL, SOCKET_NAME

#: `memfile ARGS` exactly as the `memfile` command runs it (memfile/__main__.py's run(), with
#: `python -m memfile` as the program name), except that what cli_client.answer returned is written
#: as JSON to $FASTPATH_RECORD, with the modules imported by then: an int means the server answered,
#: None that the command ran in this process. Nothing else changes (the spy returns what it got).
DRIVER = """\
import json, os, runpy, sys
import memfile.cli_client as client

real = client.answer


def spy(argv):
    result = real(argv)
    with open(os.environ["FASTPATH_RECORD"], "w", encoding="utf-8") as record:
        json.dump({"answer": result, "modules": sorted(sys.modules)}, record)
    return result


client.answer = spy
runpy.run_module("memfile", run_name="__main__", alter_sys=True)
"""

#: What the answer of a run not made by DRIVER says (nobody looked).
NOT_RECORDED = "not recorded"


@dataclass
class Ran:
    """One `memfile` process: its exit code, stdout and stderr as bytes, and what the fast path did."""

    code: int
    out: bytes
    err: bytes
    answer: int | str | None = NOT_RECORDED
    modules: list[str] = field(default_factory=list)

    @property
    def output(self) -> tuple[int, bytes, bytes]:
        return self.code, self.out, self.err


def client_env(home: Path, **extra: str) -> dict[str, str]:
    """A command line's environment: the server's (no git identity, no memfile variables; its time zone),
    without the terminal's width or colours or an output encoding of whoever runs pytest, plus `extra`."""
    env = server_env(home)
    for name in ("COLUMNS", "LINES", "NO_COLOR", "PYTHONIOENCODING"):
        env.pop(name, None)
    return env | extra


def memfile_run(
    args: list[str],
    env: dict[str, str],
    *,
    cwd: Path | None = None,
    record: Path | None = None,
    in_process: bool = False,
    stdout: Any = subprocess.PIPE,
    timeout: float = DEADLINE,
) -> Ran:
    """`memfile ARGS` as a real process: through DRIVER when `record` names the file for its record,
    else `python -m memfile`; `in_process` sets MEMFILE_NO_SERVER=1 (the reference every answer is
    compared with)."""
    env = dict(env)
    if in_process:
        env["MEMFILE_NO_SERVER"] = "1"
    command = [sys.executable, "-m", "memfile", *args]
    if record is not None:
        record.unlink(missing_ok=True)
        env["FASTPATH_RECORD"] = str(record)
        command = [sys.executable, "-c", DRIVER, *args]
    done = subprocess.run(
        command,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )
    ran = Ran(done.returncode, done.stdout or b"", done.stderr)
    if record is not None:
        assert record.exists(), f"cli_client.answer was never called: {ran}"
        recorded = json.loads(record.read_text(encoding="utf-8"))
        ran.answer, ran.modules = recorded["answer"], recorded["modules"]
    return ran


def assert_same(got: Ran, expected: Ran) -> None:
    """Exit code, stdout and stderr identical to the byte (shown decoded when they are not)."""
    assert got.output == expected.output, (
        f"exit {got.code} vs {expected.code}\n"
        f"--- stdout\n{got.out.decode(errors='replace')}\n--- expected\n{expected.out.decode(errors='replace')}\n"
        f"--- stderr\n{got.err.decode(errors='replace')}\n--- expected\n{expected.err.decode(errors='replace')}"
    )


@contextmanager
def git_env(home: Path) -> Iterator[None]:
    """No git identity nor configuration of the machine while the block runs (a module fixture runs
    outside conftest's per-test isolation)."""
    names = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM", "MEMFILE_SOURCE", "MEMFILE_MIND", "MEMFILE_VAULT")
    old = {name: os.environ.get(name) for name in names}
    os.environ["GIT_CONFIG_GLOBAL"], os.environ["GIT_CONFIG_NOSYSTEM"] = str(home / "no-gitconfig"), "1"
    for name in names[2:]:
        os.environ.pop(name, None)
    try:
        yield
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


#: A memory file whose YAML breaks on line 4: unreadable, reported, never changed.
BROKEN = "---\nid: mem_broken0001\ncategory: fact\nkey: a: b\n---\nbody\n"


def fill(setup: Setup) -> None:
    """Memories of several categories, tags, priorities and sources in mind michael (one expiring in
    3 days, one expired, one superseded, one updated, one not ASCII, one unreadable file), one in anna.

    Recall's recency decays with a half-life of 1e9 days here, so that a score of `recall --query` does
    not move between two runs a second apart (with the default 30 days, its sixth decimal may).
    """
    config = setup.root / "memfile.toml"
    config.write_text(config.read_text(encoding="utf-8") + "\n[recall]\nhalf_life_days = 1000000000\n")
    with git_env(setup.home):
        vault = Vault.open(setup.root, "michael")
        try:
            vault.store("fact", "office", "The office is in Berlin near the canal", tags=["work", "berlin"])
            vault.store("fact", "office", "The office is in Berlin, by the canal", priority="high")
            vault.store("project", "synapse_status", "Synapse deploys to vps1 with docker", tags=["synapse", "docker"])
            vault.store("project", "synapse_status", "Synapse deploys to vps1 with docker compose, version 2")
            vault.store("preference", "answer_style", "Short answers, **no** fluff", priority="critical")
            vault.store("context", "trip", "Conference trip to Lisbon", expires="3d", tags=["travel"])
            vault.store("context", "old_trip", "The trip to Porto last spring", expires="2020-01-01", tags=["travel"])
            vault.store("identity", "location", "Lives in Hamburg", priority="high")
            vault.store("identity", "location_new", "Lives in Berlin", priority="high", supersedes="identity/location")
            vault.store("note", "cafe", "Café Zoë – naïve “quotes” ✓ and 日本語", priority="low", tags=["café"])
            with vault.acting_as("agent") as agent:
                agent.store("note", "agent_guess", "The user probably likes docker", tags=["docker"])
        finally:
            vault.close()
        anna = Vault.open(setup.root, "anna")
        try:
            anna.store("fact", "garden", "Anna grows tomatoes", tags=["garden"])
        finally:
            anna.close()
    (setup.root / "michael" / "fact" / "broken.md").write_text(BROKEN, encoding="utf-8")


def request(root: Path, argv: list[str], **changed: Any) -> dict[str, Any]:
    """A command line as cli_client sends it, for the vault at `root` (keys in `changed` replace its own)."""
    asked = {
        "protocol": PROTOCOL,
        "version": __version__,
        "vault": str(root),
        "argv": argv,
        "prog": "memfile",
        "cwd": str(root),
        "env": {},
        "streams": [{"tty": False, "encoding": "utf-8", "errors": "strict"}] * 2,
        "columns": 80,
    }
    return asked | changed


def frame(kind: bytes, payload: bytes) -> bytes:
    """A frame as a server sends it: kind, 4-byte big-endian length, payload."""
    return kind + len(payload).to_bytes(4, "big") + payload


def talk(path: Path, data: bytes, timeout: float = DEADLINE) -> bytes:
    """Send `data` to the socket at `path`; all it sends back until it closes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # it closed before reading it all (a request too long): what it sent is still read
        return receive_all(sock)


def receive_all(sock: socket.socket) -> bytes:
    received = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk


def frames(data: bytes) -> list[tuple[bytes, bytes]]:
    """The frames in `data` (AssertionError when it does not split into whole frames)."""
    found = []
    while data:
        assert len(data) >= 5, data
        size = int.from_bytes(data[1:5], "big")
        assert len(data) >= 5 + size, data
        found.append((data[:1], data[5 : 5 + size]))
        data = data[5 + size :]
    return found


def read_line(conn: socket.socket) -> bytes:
    """A command line's request: up to its newline."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


class FakeServer:
    """Something listening on a vault's .memfile/cli.sock that is not memfile's server: each connection
    gets `reply(conn, request_line)` (None: connections are never even accepted). Every request line
    it read is kept in `requests`."""

    def __init__(self, root: Path, reply: Callable[[socket.socket, bytes], None] | None) -> None:
        self.path = root / ".memfile" / SOCKET_NAME
        self.reply = reply
        self.requests: list[bytes] = []
        self.stopping = threading.Event()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> FakeServer:
        self.path.parent.mkdir(exist_ok=True)
        self._listener.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self._listener.listen(8)
        if self.reply is not None:
            self._start(self._accept)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        for thread in self._threads:
            thread.join(DEADLINE)
        self.path.unlink(missing_ok=True)

    def _start(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._start(self._one, conn)

    def _one(self, conn: socket.socket) -> None:
        assert self.reply is not None
        with conn:
            conn.settimeout(DEADLINE)
            try:
                line = read_line(conn)
                self.requests.append(line)
                self.reply(conn, line)
            except OSError:
                pass
