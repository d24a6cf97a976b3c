"""`memfile serve`: the one resident process of a vault (the HTTP API and /mcp), run by uvicorn.

The home of Starlette and uvicorn (the `serve` extra). `serve` checks where it may listen (loopback
only, unless `allow_remote`, which needs a key) and whose proxy headers it believes (uvicorn's, from
the TLS proxies `forwarded_allow_ips` names only), opens the vault's minds (`Minds`: one worker
thread owns every Vault; the watcher runs in process), and answers until SIGINT or SIGTERM, then
lets the requests in flight finish, stops the watcher (its clean markers go, so no command trusts
it any more) and returns, leaving the Vaults for the process's end to release (`Minds.stop`: with
1,000 opened minds, closing each one would take seconds). The application itself is `app.build_app`.
"""

from __future__ import annotations

import gc
import ipaddress
import os
import signal
import socket
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any

import uvicorn

from ..config import find_vault
from ..errors import Conflict, InvalidInput
from ..keys import KeyStore
from ..worker import Minds, unix_listener
from .auth import LOOPBACK_NAMES

__all__ = ["serve"]

#: Seconds the requests in flight get to finish after SIGINT or SIGTERM (the process ends within 2 s).
GRACE_SECONDS = 1
KEY_HINT = "memfile key add --person --name LABEL (or --mind NAME --name LABEL for an agent)"
#: What `--host` may be without `--allow-remote`.
LOOPBACK = "a loopback address (127.0.0.1, ::1, localhost)"


def bind_address(host: str, allow_remote: bool) -> str:
    """The address to listen on for `--host`: an IP address, or `localhost` resolved; only a loopback one
    without `allow_remote`."""
    name = host.strip().strip("[]")
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        address = None
    if address is not None:
        if address.is_loopback or allow_remote:
            return str(address)
        raise InvalidInput(
            "--host",
            host,
            LOOPBACK,
            reason=f"{address} is reachable from other machines; to serve them anyway pass --allow-remote "
            "(it needs a key, and plain HTTP needs a TLS proxy in front)",
        )
    if name.lower() not in LOOPBACK_NAMES and not allow_remote:
        raise InvalidInput(
            "--host",
            host,
            LOOPBACK,
            reason="only localhost is taken as a name without --allow-remote (it needs a key, and plain "
            "HTTP needs a TLS proxy in front)",
        )
    try:
        found = {str(info[4][0]) for info in socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)}
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidInput("--host", host, "an IP address or a host name that resolves", reason=str(exc)) from None
    if not allow_remote and not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in found):
        raise InvalidInput(
            "--host",
            host,
            "a loopback address (127.0.0.1, ::1)",
            reason=f"it resolves to {', '.join(sorted(found))}, not only loopback addresses; pass --allow-remote "
            "to serve other machines",
        )
    return "127.0.0.1" if "127.0.0.1" in found else sorted(found)[0]


def _raise_open_files_limit() -> None:
    """Let the process open as many files as the system allows it (the hard limit): an opened mind keeps
    four to six open (its index and catalog), and a desktop's usual soft limit of 1,024 would run out
    near 200 minds."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        with suppress(ValueError, OSError):  # a hard limit the kernel will not grant: keep the soft one
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def allowed_hosts(host: str, allow_remote: bool, extra: Iterable[str] = ()) -> list[str]:
    """The host names the Host header may carry (IP addresses are always taken): localhost, the
    `--host` name, `extra` (`--allow-host`), and with `allow_remote` the machine's own names."""
    names = [*LOOPBACK_NAMES, *extra]
    name = host.strip().strip("[]")
    try:
        ipaddress.ip_address(name)
    except ValueError:
        names.append(name)
    if allow_remote:
        names += [socket.gethostname(), socket.getfqdn()]
    return sorted({n.lower() for n in names if n})


def trusted_proxies(given: str | None) -> list[str]:
    """The proxies `--forwarded-allow-ips` names, checked: IP addresses and networks, comma-separated, or `*`
    (every client; say behind a `--uds` socket only the proxy's user can reach). [] when None or empty. An
    item that is neither is refused: uvicorn would take it as a name that no client address matches."""
    items = [item.strip() for item in (given or "").split(",") if item.strip()]
    if items == ["*"]:
        return items
    for item in items:
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise InvalidInput(
                "--forwarded-allow-ips",
                item,
                "the TLS proxy's IP addresses or networks, comma-separated (say 127.0.0.1 or 10.0.0.0/8), or * alone",
            ) from None
    return items


def serve(
    root: str | os.PathLike[str] | None,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    uds: str | os.PathLike[str] | None = None,
    allow_remote: bool = False,
    keys_path: Path | None = None,
    allow_hosts: Iterable[str] = (),
    forwarded_allow_ips: str | None = None,
    watch: bool = True,
    on_ready: Callable[[str], None] = lambda url: None,
    notify: Callable[[str], None] = lambda message: None,
    beside: Callable[[Minds, str], AbstractContextManager[Any]] | None = None,
) -> None:
    """Serve the vault at `root` until SIGINT or SIGTERM (or `on_ready`'s caller stops it).

    Args:
        root: the vault folder (None: `MEMFILE_VAULT`, else the nearest memfile.toml upwards).
        port: 0 for any free port, shown in the URL given to `on_ready`.
        uds: listen on this Unix socket instead (made 0600, removed at the end).
        allow_remote: allow an address other machines reach (at least one key must exist).
        allow_hosts: more host names the Host header may carry (a TLS proxy's public name).
        forwarded_allow_ips: the TLS proxies whose X-Forwarded-Proto and X-Forwarded-For are believed
            (`trusted_proxies`): behind them a request's scheme is the browser's (https), so the console's
            origin check passes and its cookie is `Secure`. None: no proxy header is read.
        notify: called with each warning or hint for the person who started it.
        beside: what else the server does with its minds while it listens at the URL it is given (the
            command line's socket: cli_served.command_lines), as a context around the serving.

    Raises:
        InvalidInput: a non-loopback address without `allow_remote`, `allow_remote` without a key,
            a bad port, a `uds` path that is not a socket, a proxy that is no address or network.
        Conflict: the address or socket is in use.
    """
    vault = find_vault(root)
    _raise_open_files_limit()
    keys = KeyStore(keys_path)
    have_keys = keys.has_keys(vault)  # a keys file that cannot be trusted stops here, before listening
    if isinstance(port, bool) or not 0 <= port <= 65535:
        raise InvalidInput("--port", port, "a port number from 0 to 65535 (0: any free port)")
    proxies = trusted_proxies(forwarded_allow_ips)
    address = None
    if uds is None:
        address = bind_address(host, allow_remote)
        if allow_remote and not have_keys:
            raise InvalidInput(
                "--allow-remote",
                "given",
                "at least one key of this vault first",
                reason=f"a server other machines reach must check credentials; make one with: {KEY_HINT}",
            )
        if allow_remote:
            notify(
                "warning: other machines can reach this server, over plain HTTP: tokens and memories cross "
                "the network readable unless a TLS proxy (say Caddy or nginx) is in front"
            )
    if not have_keys:
        notify(f"no key for this vault yet: every request but /health will get 401; make one with: {KEY_HINT}")
    with _listening(address, port, uds) as (sock, url):
        minds = Minds(vault, watch=watch)
        try:
            from .app import build_app  # not at the top: the console imports this package's modules

            app = build_app(minds, keys, allowed_hosts=allowed_hosts(host, allow_remote, allow_hosts))
            config = uvicorn.Config(
                app,
                lifespan="on",
                http="h11",
                ws="none",
                log_level="warning",
                access_log=False,  # a line per request says nothing a client could not; off, like the CLI
                proxy_headers=bool(proxies),  # only from the proxies named: anyone else could claim https
                forwarded_allow_ips=proxies,
                server_header=False,
                timeout_graceful_shutdown=GRACE_SECONDS,
            )
            server = _Server(config, lambda: on_ready(url))
            with _stopping(server), beside(minds, url) if beside is not None else nullcontext():
                server.run(sockets=[sock])
        finally:
            minds.stop()  # markers and locks gone, calls finished; the Vaults are left to the process's end
            gc.freeze()  # the teardown's last collections would walk every object of every open mind (0.5-1 s)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, ready: Callable[[], None]) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._ready()


@contextmanager
def _stopping(server: uvicorn.Server) -> Iterator[None]:
    """SIGINT and SIGTERM stop the server (uvicorn's own handlers while it runs). Around them these
    handlers take a signal that comes before uvicorn listens, and the one uvicorn raises again once
    it stopped (which would otherwise kill the process with the signal instead of a clean exit 0)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        server.should_exit = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def _listening(
    address: str | None, port: int, uds: str | os.PathLike[str] | None
) -> Iterator[tuple[socket.socket, str]]:
    if uds is None:
        assert address is not None
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # asyncio sets TCP_NODELAY only then
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((address, port))
        except OSError as exc:
            sock.close()
            raise Conflict(
                f"cannot listen on {address} port {port}: {exc.strerror}; "
                "pass another --port (0: any free port), or stop the server that has it"
            ) from None
        with sock:
            shown = f"[{address}]" if family == socket.AF_INET6 else address
            yield sock, f"http://{shown}:{sock.getsockname()[1]}"
        return
    path = Path(uds).expanduser().absolute()
    try:
        sock = unix_listener(path)
    except FileExistsError:
        raise InvalidInput(
            "--uds", str(path), "a path that does not exist yet", reason="a file is in the way"
        ) from None
    except ConnectionError:
        raise Conflict(f"a server already listens on {path}; stop it, or pass another --uds PATH") from None
    except OSError as exc:
        raise InvalidInput("--uds", str(uds), "a path where a socket can be made", reason=str(exc.strerror)) from None
    try:
        with sock:
            yield sock, f"unix:{path}"
    finally:
        with suppress(OSError):
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                path.unlink()
