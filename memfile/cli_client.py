"""The command line's fast path: a read command answered by the vault's running server (`memfile serve`).

A one-shot process pays for Python's imports and for opening the index before it can answer; a server
already holds both warm, with its watcher's word that the index agrees with the files (as git's
fsmonitor daemon, dmypy and emacsclient do). So `memfile` first finds the vault (`--vault`,
`MEMFILE_VAULT`, the nearest memfile.toml: the rules of config.find_vault) and, for a command in
SERVED, hands its argv, working folder and the environment that chooses its answer (PASSED) to the
vault's server over `.memfile/cli.sock`: a Unix socket only its owner can open (mode 0600; the server
checks the peer's uid too). The server runs the very same click command (memfile/cli_served.py) and
sends back stdout, stderr and the exit code, which are written here as they came: the output is the
in-process output, byte for byte.

Any doubt and the command runs in this process instead, as if no server were there: no socket, one
left by a server that was killed, a server of another memfile version or of another vault, no word
within ANSWER_WITHIN seconds, a connection lost before the exit code came (nothing of that answer is
written), or MEMFILE_NO_SERVER=1. Only the standard library is imported here (never click, Whoosh,
git or YAML): that is the point of the fast path.

A command that found no server at all (no socket, or nothing listening on it) notes its vault in
`unserved`; once it has answered in process, `memfile` leaves a resident reader for that vault behind
(`spawn_resident`: `memfile serve --resident`, detached), which answers the next command lines warm.

The server half (cli_served.py) takes from here what both ends share: the commands served, the frames,
and `Served`, how the group of memfile.cli knows it runs a command line for another process.
"""

from __future__ import annotations

import os
import sys

from ._version import __version__

TYPE_CHECKING = False  # nothing more is imported than the answer needs (typing takes 4 ms)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .vault import Vault

#: The commands a running server answers for the command line: they read the vault, never stdin.
SERVED = frozenset(
    {
        "search",
        "recall",
        "show",
        "links",
        "backlinks",
        "list",
        "by-tag",
        "tags",
        "stats",
        "expiring",
        "status",
        "last-recall",
        "history",
        "log",
    }
)
#: The server's socket for command lines, in the vault's .memfile/ folder.
SOCKET_NAME = "cli.sock"
#: Set to 1 to run every command in this process.
NO_SERVER = "MEMFILE_NO_SERVER"
#: Set to 1 to leave no resident reader behind (a server that runs is still asked), as `[cli] resident = false`.
NO_RESIDENT = "MEMFILE_NO_RESIDENT"
#: The vault of this command when it looked for that vault's server and found none (see `spawn_resident`).
unserved: str | None = None
#: The environment the server gets: what chooses the vault, the mind and the caller, the terminal, and
#: the time zone (a server in another one refuses: a date like 2026-05-01 is read as local time).
PASSED = ("MEMFILE_VAULT", "MEMFILE_MIND", "MEMFILE_SOURCE", "NO_COLOR", "COLUMNS", "LINES", "TZ")
#: Seconds a server gets to take a command line (connect, and its first word) before it runs here.
ANSWER_WITHIN = 2.0
#: The version of the exchange over the socket.
PROTOCOL = 1
#: The kinds of frame a server sends: its word that it answers, its refusal, output, the exit code.
ANSWERING, REFUSED, STDOUT, STDERR, EXIT = b"a", b"r", b"1", b"2", b"x"
#: Global options of `memfile` that take a value, and those that take none (others: run in process).
_VALUED = ("--vault", "--mind")
_FLAGS = ("--debug", "--json")


class Served:
    """The group's obj (memfile.cli) when a server runs a command line for another process (cli_served.py):
    where the command's Vault comes from, and which commands it may run (a refused one raises `NotServed`)."""

    def __init__(self, opener: Callable[[str | None, str | None], Vault], commands: frozenset[str]) -> None:
        self.opener = opener
        self.commands = commands


class NotServed(Exception):
    """A server was asked to run a command it does not run for others: the client runs it itself."""


def answer(argv: list[str]) -> int | None:
    """Run `memfile ARGV` through the vault's server: its output written, its exit code returned.

    None when no server answers for it (the caller then runs the command itself, and nothing was written).
    """
    if os.environ.get(NO_SERVER, "") not in ("", "0") or not all(
        hasattr(s, "buffer") for s in (sys.stdout, sys.stderr)
    ):
        return None
    chosen = served_command(argv)
    if chosen is None:
        return None
    global unserved
    try:
        vault = _find_vault(chosen[0])
    except (OSError, ValueError):  # no folder to work in
        return None
    if vault is None:
        return None
    path = os.path.join(vault, ".memfile", SOCKET_NAME)
    try:
        owner = os.stat(path).st_uid
    except FileNotFoundError:  # no server (the common case costs one stat)
        unserved = vault
        return None
    except (OSError, ValueError):
        return None
    if owner != os.getuid():  # only a socket of this user's own server is asked
        return None
    try:
        frames = _ask(path, _request(argv, vault))
    except ConnectionRefusedError:  # a socket left by a server that was killed
        unserved = vault
        return None
    except (OSError, ValueError):
        return None
    except KeyboardInterrupt:  # Ctrl+C while the server answers: as in process
        sys.stderr.write("memfile: interrupted\n")
        return 130
    if frames is None:
        return None
    return _write(frames)


def spawn_resident(vault: str) -> None:
    """Leave a resident reader for `vault` behind: `memfile serve --resident` in a session of its own, its
    stdio /dev/null, not waited for (it lives on once this process ends). Nothing is started while another
    process holds the vault's serve.lock (a server or a resident reader starting up).

    Raises:
        OSError: it could not be started (the caller's command is not failed for that).
    """
    import fcntl

    try:
        fd = os.open(os.path.join(vault, ".memfile", "serve.lock"), os.O_RDONLY)
    except FileNotFoundError:
        pass
    else:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # OSError: held
        finally:
            os.close(fd)
    # -P: no folder of the caller's on the module path (a json.py there must not stand in for the standard one)
    argv = [sys.executable, "-P", "-m", "memfile", "--vault", vault, "serve", "--resident"]
    quiet = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    os.posix_spawn(sys.executable, argv, os.environ, file_actions=quiet, setsid=True)


def served_command(argv: list[str]) -> tuple[str | None, str] | None:
    """(`--vault` value, command) when the command is one a server answers, else None.

    `--vault` may follow the command too (the last one counts, as in click). Where an option before it
    may take it as its value (`search --limit --vault V`) only click knows: None, it runs in process.
    """
    vault = command = None
    at = 0
    while at < len(argv):
        arg = argv[at]
        name, eq, value = arg.partition("=")
        if command is not None and arg == "--":
            break
        if name in _VALUED and arg.startswith("--") and (command is None or name == "--vault"):
            before = argv[at - 1] if command is not None else ""
            if before.startswith("-") and "=" not in before and before not in _FLAGS:
                return None
            if not eq:
                if at + 1 == len(argv):
                    return None
                at += 1
                value = argv[at]
            vault = value if name == "--vault" else vault
        elif command is None and arg not in _FLAGS:
            if arg not in SERVED:
                return None
            command = arg
        at += 1
    return None if command is None else (vault, command)


def _find_vault(explicit: str | None) -> str | None:
    """The vault folder by config.find_vault's rules, or None where it would raise (in process, it says why)."""
    given = explicit if explicit not in (None, "") else os.environ.get("MEMFILE_VAULT") or None
    if given is not None:
        root = os.path.expanduser(given)
        if not os.path.isdir(root):
            return None
        root = os.path.realpath(root)
        return root if os.path.lexists(os.path.join(root, "memfile.toml")) else None
    folder = os.path.realpath(os.getcwd())
    while True:
        if os.path.lexists(os.path.join(folder, "memfile.toml")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _request(argv: list[str], vault: str) -> dict[str, Any]:
    return {
        "protocol": PROTOCOL,
        "version": __version__,
        "vault": vault,
        "argv": argv,
        "prog": _program_name(),
        "cwd": os.getcwd(),
        "env": {name: os.environ[name] for name in PASSED if name in os.environ},
        "streams": [_stream(sys.stdout), _stream(sys.stderr)],
        "columns": _columns(),
    }


def _stream(stream: Any) -> dict[str, Any]:
    """What decides how output is written to a stream: its encoding and errors, and whether a terminal shows it."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError, OSError):
        tty = False
    return {"tty": tty, "encoding": stream.encoding, "errors": stream.errors}


def _columns() -> int:
    """The terminal's width as shutil.get_terminal_size gives it (what click wraps help to)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return columns


def _program_name() -> str:
    """The name click shows in usage lines: `memfile`, or `python -m memfile` (click's _detect_program_name)."""
    path = sys.argv[0]
    package = getattr(sys.modules.get("__main__"), "__package__", None)
    if package in (None, ""):
        return os.path.basename(path)
    name = os.path.splitext(os.path.basename(path))[0]
    module = package if name == "__main__" else f"{package}.{name}"
    return f"python -m {module.lstrip('.')}"


def _ask(path: str, request: dict[str, Any]) -> list[tuple[bytes, bytes]] | None:
    """The server's frames up to and with the exit code, or None: no answer (the command then runs here).

    Raises:
        OSError: no connection (ConnectionRefusedError: nothing listens on the socket).
    """
    import _socket  # socket.py's C core: socket.py itself (selectors, enum wrappers) costs 3-5 ms more
    import json

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(ANSWER_WITHIN)
        sock.connect(path)  # ConnectionRefusedError: nothing listens there
    except OSError:
        sock.close()
        raise
    try:
        sock.sendall(json.dumps(request).encode("ascii") + b"\n")
        first = _frame(sock)
        if first is None or first[0] != ANSWERING:
            return None  # refused (another version, vault or settings), or gone
        sock.settimeout(None)  # it answers: the command may take as long as it takes
        frames = []
        while (frame := _frame(sock)) is not None:
            frames.append(frame)
            if frame[0] == EXIT:
                return frames if frame[1].isdigit() else None
        return None  # the server went away mid-answer: none of it is written
    except (OSError, ValueError):
        return None
    finally:
        sock.close()


def _frame(sock: Any) -> tuple[bytes, bytes] | None:
    """The next frame a server sends: a kind byte, a 4-byte big-endian length, the payload; None when
    the stream ends first."""
    head = _exactly(sock, 5)
    if head is None:
        return None
    payload = _exactly(sock, int.from_bytes(head[1:], "big"))
    return None if payload is None else (bytes(head[:1]), payload)


def _exactly(sock: Any, size: int) -> Any:
    """`size` bytes from `sock` (a bytearray, filled in place: a recall of 6 MB is copied once), or None."""
    data = bytearray(size)
    view = memoryview(data)
    got = 0
    while got < size:
        count = sock.recv_into(view[got:])
        if not count:
            return None
        got += count
    return data


def _write(frames: list[tuple[bytes, bytes]]) -> int:
    """Write the output frames to stdout and stderr in their order; the exit code. A reader gone away
    (say `| head`) ends stdout quietly, as in process; what goes to stderr is still written."""
    code = 0
    for kind, payload in frames:
        if kind == EXIT:
            code = int(payload)
        elif kind in (STDOUT, STDERR):
            stream = sys.stdout if kind == STDOUT else sys.stderr
            try:
                stream.flush()
                stream.buffer.write(payload)
                stream.buffer.flush()
            except BrokenPipeError:
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    return code
