"""The command line's long-running commands: `memfile serve` (the vault's one resident process: the HTTP
API, /mcp, the console; or with `--resident` its command line only), `memfile mcp` (one mind over stdio)
and `memfile watch`."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import click

from ..config import find_vault
from ..errors import InvalidInput
from .common import DISTRIBUTION, State, json_option, print_json
from .options import MemfileCommand

#: The packages of the `serve` extra: without them `memfile serve` says how to install them.
SERVE_PACKAGES = ("starlette", "uvicorn", "h11", "anyio", "jinja2", "markupsafe", "python_multipart")


@click.command(cls=MemfileCommand)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback only by default).")
@click.option("--port", type=int, default=8765, show_default=True, help="Port to listen on (0: any free port).")
@click.option("--uds", metavar="PATH", help="Listen on this Unix socket instead (made 0600): the safest transport.")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow an address other machines reach (needs a key; put a TLS proxy in front of plain HTTP).",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer requests whose Host header is NAME (say a TLS proxy's public name); repeatable.",
)
@click.option(
    "--forwarded-allow-ips",
    metavar="IPS",
    help="Believe X-Forwarded-Proto and X-Forwarded-For from these TLS proxies (IP addresses or networks, "
    "comma-separated; * for any): behind them the console logs in over https with a Secure cookie.",
)
@click.option(
    "--no-watch", is_flag=True, help="Do not run the watcher (hand edits are seen at the next request anyway)."
)
@click.option(
    "--keys",
    "keys_path",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The keys file (default: $MEMFILE_KEYS, else ~/.config/memfile/keys.toml; see memfile key).",
)
@click.option(
    "--resident",
    is_flag=True,
    help="Answer only the command line's read commands, on .memfile/cli.sock (no HTTP); exit after "
    "[serve] idle_exit seconds without one. A read command starts this by itself (docs/server.md).",
)
@click.option("--stop", is_flag=True, help="Stop the vault's resident reader (a full memfile serve keeps running).")
@json_option
def serve(state: State, no_watch: bool, resident: bool, stop: bool, as_json: bool, **options: Any) -> None:
    """Serve every mind of the vault over HTTP (Synapse's memory API, /mcp and the /console pages).

    Agents authenticate with a Mind Key, people with their token (make them
    with `memfile key add`); each request sends `Authorization: Bearer TOKEN`.
    A person opens the memory console in a browser at /console and logs in
    there once with their token. Prints the URLs when ready; stops on Ctrl+C
    or SIGTERM once the requests in flight are answered. Needs the optional
    extra: pip install 'memfile-vault[serve]'. Endpoints and security:
    docs/server.md.

    Behind a TLS proxy, name its public name with --allow-host and its
    address with --forwarded-allow-ips: its X-Forwarded-Proto is then
    believed (from it only), and the console's login works over https.

    Example: memfile --vault ~/memory serve --port 8765

    Example: memfile serve --allow-host memory.example.com --forwarded-allow-ips 127.0.0.1

    Example: curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8765/memory/recall

    Example: memfile serve --stop
    """
    if stop:
        from ..cli_served import stop_resident

        root = find_vault(state.vault_path)
        pid = stop_resident(root)
        if as_json:
            print_json({"stopped": pid is not None, "pid": pid})
        else:
            click.echo(
                f"stopped the resident reader of {root} (pid {pid})" if pid else f"no resident reader runs for {root}"
            )
        return
    group = click.get_current_context().find_root().command  # `memfile`: it runs the command lines it answers
    if resident:
        from ..cli_served import resident as run_resident

        run_resident(find_vault(state.vault_path), lambda message: click.echo(f"memfile: {message}", err=True), group)
        return
    try:
        from ..server import serve as run_server
    except ModuleNotFoundError as exc:
        if exc.name not in SERVE_PACKAGES:
            raise
        raise InvalidInput(
            "serve",
            str(exc),
            f"Starlette and uvicorn: pip install '{DISTRIBUTION}[serve]' (in a checkout of memfile: pip install '.[serve]')",
        ) from None
    from ..cli_served import command_lines

    def ready(url: str) -> None:
        click.echo(f"memfile: serving {url} (Ctrl+C to stop)")
        if url.startswith("http"):
            click.echo(f"memfile: the memory console: {url}/console (log in with a person's token)")

    def notify(message: str) -> None:
        click.echo(f"memfile: {message}", err=True)

    run_server(
        state.vault_path,
        watch=not no_watch,
        on_ready=ready,
        notify=notify,
        beside=lambda minds, url: command_lines(minds, url, notify, group),
        **options,
    )


@click.command(cls=MemfileCommand)
@click.option("--autocommit", is_flag=True, help="Commit hand edits, one commit per batch.")
@click.option(
    "--debounce", type=float, default=0.3, show_default=True, help="Seconds of quiet before a batch is applied."
)
@click.pass_obj
def watch(state: State, autocommit: bool, debounce: float) -> None:
    """Keep the index in line with the files while editors change them (Ctrl-C stops).

    Example: memfile watch --autocommit
    """
    import signal
    import threading

    from ..watch import Watcher

    if not 0.0 < debounce <= 10.0:
        raise InvalidInput("debounce", debounce, "seconds, more than 0 and at most 10")
    from ..cli_served import stop_resident

    vault = state.vault()
    stopped = stop_resident(vault.root)  # it watches the minds it opened: this watcher takes its place
    if stopped is not None:
        click.echo(
            f"memfile: stopped the vault's resident reader (pid {stopped}): this watcher takes its place", err=True
        )
    done = threading.Event()

    def report(sync: Any, paths: list[str]) -> None:
        if sync.changed or sync.skipped:
            click.echo(
                f"{time.strftime('%H:%M:%S')} indexed {sync.added} added, {sync.updated} updated, "
                f"{sync.removed} removed ({len(paths)} paths)"
            )
        for issue in sync.skipped:
            click.echo(f"memfile: warning: {issue}", err=True)

    watcher = Watcher(vault, debounce=debounce, autocommit=autocommit, on_batch=report).start()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: done.set())
    click.echo(f"watching {vault.root / vault.mind} (pid {os.getpid()}); Ctrl-C stops", err=True)
    try:
        done.wait()  # signals interrupt the wait; no polling
    finally:
        watcher.stop()
        click.echo("stopped", err=True)


@click.command(cls=MemfileCommand)
@click.option(
    "--no-watch",
    is_flag=True,
    help="Do not start a watcher (each call then checks the files itself; the answers are the same).",
)
@click.option("--read-mind", "read_minds", multiple=True, help="Recall also reads this mind (repeat), read-only.")
@click.pass_obj
def mcp(state: State, no_watch: bool, read_minds: tuple[str, ...]) -> None:
    """Serve one mind to an agent over the Model Context Protocol (stdio).

    Needs the optional extra: pip install 'memfile-vault[mcp]' (in a checkout: pip install '.[mcp]').
    Everything the agent stores is source agent, unverified; it reaches no other mind, but its
    recall also reads each --read-mind (a group chat's mind with its speaker's profile).

    Example: memfile --vault ~/chats --mind group_a mcp --read-mind alice
    """
    try:
        from ..mcp_server import serve
    except ImportError as exc:
        raise InvalidInput(
            "mcp",
            str(exc),
            f"the MCP SDK: pip install '{DISTRIBUTION}[mcp]' (in a checkout of memfile: pip install '.[mcp]')",
        ) from None
    serve(state.vault_path, state.mind, watch=not no_watch, read_minds=read_minds)
