"""The command line's `memfile serve`: the vault's one resident process (the HTTP API, /mcp)."""

from __future__ import annotations

from pathlib import Path

import click

from .cli import DISTRIBUTION, State, main
from .errors import InvalidInput

#: The packages of the `serve` extra: without them `memfile serve` says how to install them.
SERVE_PACKAGES = ("starlette", "uvicorn", "h11", "anyio", "jinja2", "markupsafe", "python_multipart")


@main.command()
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
    "--no-watch", is_flag=True, help="Do not run the watcher (hand edits are seen at the next request anyway)."
)
@click.option(
    "--keys",
    "keys_path",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The keys file (default: $MEMFILE_KEYS, else ~/.config/memfile/keys.toml; see memfile key).",
)
@click.pass_obj
def serve(
    state: State,
    host: str,
    port: int,
    uds: str | None,
    allow_remote: bool,
    allow_hosts: tuple[str, ...],
    no_watch: bool,
    keys_path: Path | None,
) -> None:
    """Serve every mind of the vault over HTTP (Synapse's memory API, /mcp and the /console pages).

    Agents authenticate with a Mind Key, people with their token (make them
    with `memfile key add`); each request sends `Authorization: Bearer TOKEN`.
    A person opens the memory console in a browser at /console and logs in
    there once with their token. Prints the URLs when ready; stops on Ctrl+C
    or SIGTERM once the requests in flight are answered. Needs the optional
    extra: pip install 'memfile-vault[serve]'. Endpoints and security:
    docs/server.md.

    Example: memfile --vault ~/memory serve --port 8765

    Example: curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8765/memory/recall
    """
    try:
        from .server import serve as run_server
    except ModuleNotFoundError as exc:
        if exc.name not in SERVE_PACKAGES:
            raise
        raise InvalidInput(
            "serve",
            str(exc),
            f"Starlette and uvicorn: pip install '{DISTRIBUTION}[serve]' (in a checkout of memfile: pip install '.[serve]')",
        ) from None
    from .cli_served import command_lines

    def ready(url: str) -> None:
        click.echo(f"memfile: serving {url} (Ctrl+C to stop)")
        if url.startswith("http"):
            click.echo(f"memfile: the memory console: {url}/console (log in with a person's token)")

    def notify(message: str) -> None:
        click.echo(f"memfile: {message}", err=True)

    run_server(
        state.vault_path,
        host=host,
        port=port,
        uds=uds,
        allow_remote=allow_remote,
        keys_path=keys_path,
        allow_hosts=allow_hosts,
        watch=not no_watch,
        on_ready=ready,
        notify=notify,
        beside=lambda minds, url: command_lines(minds, url, notify),
    )
