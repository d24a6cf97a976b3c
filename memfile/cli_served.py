"""The command line's server half: `memfile serve` runs the read commands of other processes' command lines.

The server takes them on `.memfile/cli.sock` (cli_client.py is the other end; only a peer of this
user is heard) and runs the very same click command on its worker thread, with the Vault it already
holds open (`Minds.acting`, so the watcher's word that the index agrees with the files counts), the
caller's environment choosing vault, mind and caller (`config.environment`), and the output written
into frames for the client, as the client's own stdout and stderr would have taken it: the same
encoding and errors, and whether each is a terminal (bold in `search`, click's colours). So the
answer is the in-process answer, byte for byte, exit code included.

It refuses (and the client runs the command itself) what it cannot answer as the client would: another
memfile version or protocol, another vault, memfile.toml changed since the server started (its opened
minds keep the settings they were opened with), another time zone (`--at 2026-05-01` is a local date),
output that is not UTF-8, a command it does not serve.

The server also holds `.memfile/serve.lock` ("PID ADDRESS": `memfile status` names it); a second server
of the same vault answers HTTP only. Both are made again within a second when they go (`rm -rf .memfile`
is a way to rebuild the index, and the server runs on).

The resident reader (`resident`, `memfile serve --resident`) is the same socket and worker without HTTP:
a read command that found no server leaves one behind (cli_client.spawn_resident). It holds the same lock
("PID resident SINCE IDLE_EXIT"; the lock file's mtime is its last request), and ends by itself after
`[serve] idle_exit` seconds without a request, when memfile.toml changes, when the vault folder moves or
goes, when its lock file or socket goes, or on SIGTERM (`stop_resident`: `memfile serve --stop`, a full
`memfile serve` or `memfile watch` taking its place).
"""

from __future__ import annotations

import codecs
import gc
import io
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .cli_client import (
    ANSWERING,
    EXIT,
    PASSED,
    PROTOCOL,
    REFUSED,
    SERVED,
    SOCKET_NAME,
    STDERR,
    STDOUT,
    NotServed,
    Served,
    served_command,
)
from .config import CONFIG_NAME, STATE_DIR, caller_source, environment, load_config, select_mind
from .errors import MemfileError
from .files import hold_lock, lock_text
from .terminal import wrapped
from .vault import Vault
from .worker import MAX_SOCKET_PATH, Caller, Minds, unix_listener

if TYPE_CHECKING:
    import click

#: The lock a vault's answering server holds, with "PID ADDRESS" in it (Vault.status reads it).
SERVER_LOCK = "serve.lock"
#: The most a command line may take (its argv and environment).
MAX_REQUEST = 1024 * 1024
#: Seconds a client gets to send its command line once connected.
REQUEST_WITHIN = 2.0
#: Seconds between looks at whether the lock file and the socket are still there (`rm -rf .memfile`).
KEEP_EVERY = 1.0
#: `SO_PEERCRED`'s struct ucred: pid, uid, gid.
_UCRED = struct.Struct("3i")
#: The word after the pid in the lock of a resident reader (a full server writes its address there).
RESIDENT = "resident"
#: Seconds a resident reader gets to end after SIGTERM (then SIGKILL: it only reads, so nothing is lost).
STOP_WITHIN = 5.0


@contextmanager
def command_lines(minds: Minds, address: str, notify: Callable[[str], None], group: click.Command) -> Iterator[None]:
    """While the block runs, answer the vault's command lines on `.memfile/cli.sock` (`memfile serve`),
    each run by `group` (memfile.cli.main, which `memfile serve` hands in).

    Nothing is answered (and `notify` says why) when another server of the vault answers them, or the
    socket cannot be made: every command then runs in its own process, as without a server.
    """
    state = minds.root / STATE_DIR
    try:
        held = hold_lock(state / SERVER_LOCK, f"{os.getpid()} {address}")
    except OSError as exc:
        notify(f"warning: the command line will not use this server: {state} cannot be written ({exc.strerror})")
        yield
        return
    replaced = stop_resident(minds.root) if held is None else None
    if replaced is not None:  # a resident reader answered the command line: this server takes its place
        held = hold_lock(state / SERVER_LOCK, f"{os.getpid()} {address}")
        if held is not None:
            notify(f"stopped the vault's resident reader (pid {replaced}); this server answers the command line")
    if held is None:
        notify("another server of this vault answers the command line; this one answers HTTP and /mcp only")
        yield
        return
    lock = _Lock(state / SERVER_LOCK, f"{os.getpid()} {address}", held)
    try:
        lines = _CommandLines(minds, group)
        reason = lines.start()
        if reason is not None:
            notify(f"warning: the command line will not use this server: {reason}")
        stop = threading.Event()
        keeper = threading.Thread(target=_keep, args=(lock, lines, stop, notify), name="memfile-cli-keep", daemon=True)
        keeper.start()
        try:
            yield
        finally:
            stop.set()
            keeper.join()
            lines.stop()
    finally:
        os.close(lock.fd)  # frees the lock: `memfile status` no longer names this server


class _Lock:
    """The server's lock: its file, the text in it, and the descriptor holding its flock."""

    def __init__(self, path: Path, text: str, fd: int) -> None:
        self.path, self.text, self.fd = path, text, fd
        self._vault = _identity(path.parent.parent)

    def vault_here(self) -> bool:
        """True while the vault's folder is where the server found it (not moved, removed or replaced)."""
        return _identity(self.path.parent.parent) == self._vault

    def held_here(self) -> bool:
        """True while the lock file at `path` is the one this server holds (not removed, not replaced)."""
        return _identity(self.path) == _identity(self.fd)


def _identity(file: Path | int) -> tuple[int, int] | None:
    """(device, inode) of a path or an open descriptor; None when there is none."""
    try:
        info = os.stat(file)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _keep(lock: _Lock, lines: _CommandLines, stop: threading.Event, notify: Callable[[str], None]) -> None:
    """Every KEEP_EVERY seconds until `stop`: when `rm -rf .memfile` (or anything else) took the server's lock
    file or socket away, take them again, so `memfile status` names this server and the command line uses it
    (a second server would take them otherwise); when another server took them meanwhile, leave them to it."""
    while not stop.wait(KEEP_EVERY):
        if (lock.held_here() and lines.listening_here()) or not lock.vault_here():
            continue  # all is in place; or the vault moved, and its lock and socket went along (or with it)
        try:
            fd = lock.fd if lock.held_here() else hold_lock(lock.path, lock.text)
        except OSError:
            continue  # the state folder cannot be made just now: try again at the next look
        if fd is None:
            notify("another server of this vault took the command line; this one answers HTTP and /mcp only")
            lines.stop()
            return
        if fd != lock.fd:
            os.close(lock.fd)
            lock.fd = fd
        reason = lines.listen_again()
        notify(
            f"{lock.path.parent} was removed while the server ran: made its lock and socket again"
            if reason is None
            else f"warning: the command line will not use this server: {reason}"
        )


class _CommandLines:
    """The socket: one thread accepts, and one per connection waits for the worker's answer."""

    def __init__(self, minds: Minds, group: click.Command, heard: Callable[[], None] = lambda: None) -> None:
        """`group` runs each command line; `heard` is called as each comes in (a resident reader marks its
        lock file)."""
        self.minds = minds
        self.group = group
        self.path = minds.root / STATE_DIR / SOCKET_NAME
        self._settings = _stamp(minds.root / CONFIG_NAME)
        self._heard = heard
        self._busy = 0  # connections being answered
        self._last = time.monotonic()  # when the last connection came in or was answered
        self._count = threading.Lock()
        self._listener: socket.socket | None = None
        self._socket: tuple[int, int] | None = None  # the identity of the socket file this server listens on
        self._streams: tuple[Any, Any] | None = None

    def start(self) -> str | None:
        """Listen; the reason why not, or None."""
        reason = self._listen()
        if reason is None:
            self._streams = (sys.stdout, sys.stderr)
            sys.stdout, sys.stderr = _ThreadStream(sys.stdout), _ThreadStream(sys.stderr)
        return reason

    def _listen(self) -> str | None:
        if len(os.fsencode(self.path)) > MAX_SOCKET_PATH:
            return f"the path {self.path} is too long for a Unix socket ({MAX_SOCKET_PATH} bytes at most)"
        try:
            self._listener = unix_listener(self.path)
            self._socket = _identity(self.path)
        except OSError as exc:
            return f"{self.path} cannot be made ({exc.strerror})"
        threading.Thread(target=self._accept, args=(self._listener,), name="memfile-cli", daemon=True).start()
        return None

    def idle(self) -> float:
        """Seconds since the last command line was answered (0 while one is being answered)."""
        with self._count:
            return 0.0 if self._busy else time.monotonic() - self._last

    def settings_changed(self) -> bool:
        """True once memfile.toml is not the one this server started with."""
        return _stamp(self.minds.root / CONFIG_NAME) != self._settings

    def listening_here(self) -> bool:
        """True while the socket file at `path` is the one this server listens on (or it never could)."""
        return self._listener is None or self._owns_path()

    def _owns_path(self) -> bool:
        return _identity(self.path) == self._socket

    def listen_again(self) -> str | None:
        """Listen on a new socket at `path` (the old one was removed); the reason why not, or None."""
        self._close()
        return self._listen()

    def stop(self) -> None:
        """Stop taking command lines (those being answered finish, or their clients run them themselves)."""
        if self._listener is None:
            return
        self._close()
        if self._streams is not None:
            sys.stdout, sys.stderr = self._streams
            self._streams = None

    def _close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is None:
            return
        if self._owns_path():  # never another server's socket, made there since
            with suppress(OSError):
                self.path.unlink()
        with suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        listener.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # stopped
            threading.Thread(target=self._counted, args=(conn,), name="memfile-cli-answer", daemon=True).start()

    def _counted(self, conn: socket.socket) -> None:
        with self._count:
            self._busy += 1
        try:
            with suppress(OSError):
                self._heard()
            self._answer(conn)
        finally:
            with self._count:
                self._busy -= 1
                self._last = time.monotonic()

    def _answer(self, conn: socket.socket) -> None:
        """One command line: heard, refused or run on the worker thread, and answered in frames."""
        with conn:
            try:
                if _UCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))[1] != os.getuid():
                    return  # only this user's command lines (the socket's mode says so too)
                conn.settimeout(REQUEST_WITHIN)
                asked = time.monotonic()
                request = _read_request(conn)
                refusal = self._refusal(request)
                if refusal is not None:
                    conn.sendall(_frame(REFUSED, refusal.encode("utf-8")))
                    return
                conn.sendall(_frame(ANSWERING, b""))
                conn.settimeout(None)
                frames = self.minds.run(lambda: run_command(self.minds, self.group, request, asked), read=True).result()
                conn.sendall(b"".join(_frame(kind, payload) for kind, payload in frames))
            except (OSError, ValueError, RuntimeError, CancelledError, NotServed):
                return  # the client left, sent nonsense, or the server is stopping: it runs the command itself
            except Exception:  # noqa: BLE001 - a bug: the client runs the command itself; the traceback is ours
                traceback.print_exc()

    def _refusal(self, request: dict[str, Any]) -> str | None:
        """Why this server cannot answer the command line as the client's own process would, or None."""
        env = request["env"]
        if request["protocol"] != PROTOCOL or request["version"] != __version__:
            return f"this server is memfile {__version__} (protocol {PROTOCOL})"
        if request["vault"] != str(self.minds.root):
            return f"this server serves the vault {self.minds.root}"
        if self.settings_changed():
            return f"{CONFIG_NAME} changed since this server started; restart it to use the new settings"
        if env.get("TZ") != os.environ.get("TZ"):
            return "the command line runs in another time zone (TZ)"
        if not all(_utf8(stream["encoding"]) for stream in request["streams"]):
            return "the command line's output is not UTF-8"
        if served_command(request["argv"]) is None:
            return "this server answers only memfile's read commands"
        return None


def resident(root: Path, notify: Callable[[str], None], group: click.Command) -> None:
    """`memfile serve --resident`: answer the command lines of the vault at `root` on its socket (no HTTP),
    each run by `group` (memfile.cli.main), until one of the ends in the module docstring. Returns at once
    (saying why) when another server or resident reader holds the vault's lock, or the socket cannot be made.

    Raises:
        NotAVault, InvalidConfig: `root` is no vault, or its memfile.toml cannot be used.
    """
    idle_exit = load_config(root).idle_exit
    path = root / STATE_DIR / SERVER_LOCK
    text = f"{os.getpid()} {RESIDENT} {int(time.time())} {idle_exit:g}"
    try:
        held = hold_lock(path, text)
    except OSError as exc:
        notify(f"{path.parent} cannot be written ({exc.strerror}): no resident reader")
        return
    if held is None:
        notify("another server or resident reader answers this vault's command line")
        return
    lock = _Lock(path, text, held)
    minds = Minds(root, watch=True, tidy=False)
    lines = _CommandLines(minds, group, heard=lambda: os.utime(lock.fd))
    stop = threading.Event()
    try:
        reason = lines.start()
        if reason is not None:
            notify(f"no resident reader: {reason}")
            return
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(number, lambda *_: stop.set())
        minds.run(lambda: _open_chosen_mind(minds), read=True)  # warm for the next command line
        notify(f"answering the command line of {root} (pid {os.getpid()}); exits after {idle_exit:g} s idle")
        while not stop.wait(KEEP_EVERY):
            why = _why_end(lock, lines, idle_exit)
            if why is not None:
                notify(f"stopping: {why}")
                break
    finally:
        lines.stop()
        minds.stop()
        os.close(lock.fd)
        gc.freeze()  # as `memfile serve`: the teardown's last collections would walk every object of its minds


def _open_chosen_mind(minds: Minds) -> None:
    """On the worker: open the mind a command line would choose (MEMFILE_MIND, default_mind, the only one)."""
    try:
        with minds.acting(Caller(select_mind(minds.root, minds.config), caller_source())):
            pass
    except MemfileError:
        pass  # no mind is chosen by default: each command line opens its own


def _why_end(lock: _Lock, lines: _CommandLines, idle_exit: float) -> str | None:
    """Why a resident reader ends now, or None."""
    if not lock.vault_here():
        return "the vault folder moved or was removed"
    if not lock.held_here() or not lines.listening_here():
        return "its lock file or socket was removed"
    if lines.settings_changed():
        return f"{CONFIG_NAME} changed"
    if lines.idle() >= idle_exit:
        return f"no command line for {idle_exit:g} s"
    return None


def resident_pid(root: Path) -> int | None:
    """The pid of the vault's resident reader, or None when none runs (nothing, or a full `memfile serve`)."""
    text = lock_text(root / STATE_DIR / SERVER_LOCK) or ""
    pid, _, rest = text.partition(" ")
    return int(pid) if pid.isdigit() and rest.split(" ", 1)[0] == RESIDENT else None


def stop_resident(root: Path) -> int | None:
    """Stop the vault's resident reader (SIGTERM; SIGKILL after STOP_WITHIN seconds) and wait until its
    lock is free. Returns its pid, or None when none runs (a full `memfile serve` is left running)."""
    pid = resident_pid(root)
    if pid is None:
        return None
    for number, within in ((signal.SIGTERM, STOP_WITHIN), (signal.SIGKILL, STOP_WITHIN)):
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + within
        while resident_pid(root) == pid and time.monotonic() < deadline:
            time.sleep(0.02)
        if resident_pid(root) != pid:
            break
    return pid


def run_command(
    minds: Minds, group: click.Command, request: dict[str, Any], asked: float
) -> list[tuple[bytes, bytearray]]:
    """On the worker thread: `memfile ARGV` of a command line (`group`: memfile.cli.main), as its own
    process would run it, with the Vault of its mind from `minds`. Returns its output and exit code as frames, in order."""
    frames: list[tuple[bytes, bytearray]] = []
    out, err = (
        _output(frames, kind, stream) for kind, stream in zip((STDOUT, STDERR), request["streams"], strict=True)
    )
    columns = request["columns"]
    with ExitStack() as held:

        def opener(path: str | None, mind: str | None) -> Vault:
            """As Vault.open, on the Vault this server holds for the mind (the client found the same vault)."""
            caller = Caller(select_mind(minds.root, minds.config, mind), caller_source())
            vault = held.enter_context(minds.acting(caller, asked))
            earlier = list(vault.notices)  # a read may run while a store of the worker waits for git
            held.callback(lambda: vault.notices.__setitem__(slice(None), earlier))
            vault.notices.clear()
            vault.issues = []  # as a new Vault: only what this command's reads find
            return vault

        with environment(request["env"]), _writing_to(out, err):
            try:
                group.main(
                    args=list(request["argv"]),
                    prog_name=request["prog"],
                    standalone_mode=True,
                    obj=Served(opener, SERVED),
                    terminal_width=max(min(int(columns), 80) - 2, 50),  # click's HelpFormatter, on that terminal
                )
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
                if not isinstance(exc.code, int | None):
                    print(exc.code, file=sys.stderr)
            out.flush()
            err.flush()
    frames.append((EXIT, bytearray(str(code), "ascii")))
    return frames


def _read_request(conn: socket.socket) -> dict[str, Any]:
    """The command line: one line of JSON (ValueError when it is not one, or not whole)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk or len(data) + len(chunk) > MAX_REQUEST:
            raise ValueError("no whole command line")
        data += chunk
    request = json.loads(data)
    if not isinstance(request, dict):
        raise ValueError("not a command line")
    argv, env, streams = request.get("argv"), request.get("env"), request.get("streams")
    valid = (
        isinstance(request.get("protocol"), int)
        and isinstance(request.get("version"), str)
        and isinstance(request.get("vault"), str)
        and isinstance(argv, list)
        and all(isinstance(arg, str) for arg in argv)
        and isinstance(env, dict)
        and all(name in PASSED and isinstance(value, str) for name, value in env.items())
        and isinstance(streams, list)
        and len(streams) == 2
        and all(isinstance(s, dict) and isinstance(s.get("encoding"), str) for s in streams)
        and isinstance(request.get("prog"), str)
        and isinstance(request.get("columns"), int)
    )
    if not valid:
        raise ValueError("not a command line")
    return request


def _frame(kind: bytes, payload: bytes | bytearray) -> bytes:
    return kind + len(payload).to_bytes(4, "big") + payload


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def _utf8(encoding: str) -> bool:
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


class _Recorder(io.RawIOBase):
    """A client's stdout or stderr: what is written becomes a frame, or joins the last one of its stream."""

    def __init__(self, frames: list[tuple[bytes, bytearray]], kind: bytes, tty: bool) -> None:
        super().__init__()
        self._frames, self._kind, self._tty = frames, kind, tty

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self._frames and self._frames[-1][0] == self._kind:
            self._frames[-1][1].extend(data)
        else:
            self._frames.append((self._kind, bytearray(data)))
        return len(data)

    def isatty(self) -> bool:
        return self._tty


def _output(frames: list[tuple[bytes, bytearray]], kind: bytes, stream: dict[str, Any]) -> Any:
    """The text stream a command writes for the client: its encoding, its errors as `memfile`'s main
    sets them (a strict stream gets backslash escapes instead of an error), and on the client's terminal
    every control character shown as an escape (`terminal.Shown`), as `memfile`'s main does."""
    errors = stream.get("errors") or "strict"
    text = io.TextIOWrapper(  # type: ignore[type-var]
        _Recorder(frames, kind, bool(stream.get("tty"))),
        encoding=stream["encoding"],
        errors="backslashreplace" if errors == "strict" else errors,
        write_through=True,
    )
    return wrapped(text)


class _ThreadStream:
    """sys.stdout or sys.stderr of a server: a command line's stream in the thread running its command
    (`_writing_to`), the process's own everywhere else."""

    def __init__(self, own: Any) -> None:
        self._own = own
        self._local = threading.local()

    def _target(self) -> Any:
        return getattr(self._local, "target", None) or self._own

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)

    def write(self, text: str) -> int:
        return int(self._target().write(text))

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:
        return bool(self._target().isatty())


@contextmanager
def _writing_to(out: Any, err: Any) -> Iterator[None]:
    """sys.stdout and sys.stderr are `out` and `err` in this thread while the block runs."""
    pairs = [(s, t) for s, t in ((sys.stdout, out), (sys.stderr, err)) if isinstance(s, _ThreadStream)]
    before = [(stream, getattr(stream._local, "target", None)) for stream, _ in pairs]
    for stream, target in pairs:
        stream._local.target = target
    try:
        yield
    finally:
        for stream, earlier in before:
            stream._local.target = earlier
