"""The command line: a thin click face over `Vault`.

Each command parses its options, calls one Vault method and prints the
result: data on stdout, warnings and notices on stderr. Errors are turned
into messages and exit codes in one place (`MemfileGroup.invoke`).

This module is the group, `memfile` (`main`), and the list of its commands. The commands live in the
modules beside it (memories, git, keys, review, serve, transfer), which take what they share from `common` and
`options` and never import this module back.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from ..cli_client import NotServed, Served
from ..errors import EXIT_UNEXPECTED, InvalidInput, MemfileError
from ..terminal import wrapped
from . import capture, git, keys, memories, review, serve, transfer
from .common import DISTRIBUTION, State
from .options import json_by_default

#: Commands that list unreadable files themselves: no summary line about them.
LISTS_UNREADABLE = {"status", "doctor"}
#: Commands whose terminal output is drawn by a library (uvicorn's coloured log, MCP's stdio protocol):
#: their streams are not `terminal.Shown`.
DRAWS_ITS_OWN = {"serve", "mcp"}


class MemfileGroup(click.Group):
    """Runs a command and translates MemfileError (and surprises) into exit codes."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        for arg in args:
            try:
                arg.encode("utf-8")
            except UnicodeEncodeError:  # bytes that are not UTF-8: Python keeps them as lone surrogates
                try:
                    raw = arg.encode("utf-8", "surrogateescape")
                except UnicodeEncodeError:
                    raw = arg.encode("utf-8", "replace")
                given = raw.decode("ascii", "backslashreplace")
                problem = InvalidInput(
                    "argument", given, "UTF-8 text (set the terminal to UTF-8)", reason="it is not valid UTF-8"
                )
                raise click.UsageError(str(problem), ctx) from None
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MemfileError as exc:
            _report_debug(ctx, exc)
            click.echo(f"memfile: error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort, NotServed):
            raise
        except BrokenPipeError:
            # The reader (say `| head`) went away: stop quietly, as other command-line tools do.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(0)
        except KeyboardInterrupt:
            click.echo("memfile: interrupted", err=True)
            ctx.exit(130)
        except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback for users
            _report_debug(ctx, exc)
            click.echo(f"memfile: unexpected error: {exc!r}; rerun with --debug and report it", err=True)
            ctx.exit(EXIT_UNEXPECTED)
        finally:
            _print_messages(ctx)


def _report_debug(ctx: click.Context, exc: BaseException) -> None:
    state = ctx.obj
    if isinstance(state, State) and state.debug:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)


def _print_messages(ctx: click.Context) -> None:
    """Notices, and one line about files that cannot be read (`status` and `doctor` list them)."""
    state = ctx.obj
    if not isinstance(state, State):
        return
    for vault in state.opened:
        if len(vault.issues) == 1:
            click.echo(f"memfile: warning: {vault.issues[0]}", err=True)
        elif vault.issues and ctx.invoked_subcommand not in LISTS_UNREADABLE:
            click.echo(
                f"memfile: warning: {len(vault.issues)} files cannot be read and are skipped; see: memfile doctor",
                err=True,
            )
        for notice in vault.notices:
            click.echo(f"memfile: {notice}", err=True)


# color: click would strip escape sequences from what goes to a pipe or a file; memfile writes a memory
# there as stored, and styles only a terminal's output (terminal.Shown escapes a memory's own codes).
@click.group(cls=MemfileGroup, context_settings={"help_option_names": ["-h", "--help"], "color": True})
@click.option(
    "--vault",
    "vault_path",
    metavar="PATH",
    help="Vault folder (default: $MEMFILE_VAULT, else the nearest parent with memfile.toml).",
)
@click.option(
    "--mind", metavar="NAME", help="Mind to use (default: $MEMFILE_MIND, else default_mind, else the only mind)."
)
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for programs (the command's own --json).")
@click.version_option(package_name=DISTRIBUTION, prog_name="memfile")
@click.pass_context
def main(ctx: click.Context, vault_path: str | None, mind: str | None, debug: bool, as_json: bool) -> None:
    """Long-term memory for LLM agents, kept as Markdown files in git.

    --vault, --mind, --debug and --json may also follow the command.

    Example: memfile --vault sample_vault recall
    """
    if as_json:
        json_by_default(ctx)
    if isinstance(ctx.obj, Served):  # run by the vault's server for a command line of another process
        if ctx.invoked_subcommand not in ctx.obj.commands:
            raise NotServed(ctx.invoked_subcommand)
        ctx.obj = State(vault_path, mind, debug, ctx.obj.opener)
        return
    for stream in (sys.stdout, sys.stderr):  # a terminal that cannot show a character gets an escape, not an error
        if hasattr(stream, "reconfigure") and getattr(stream, "errors", "") == "strict":
            stream.reconfigure(errors="backslashreplace")
    if ctx.invoked_subcommand not in DRAWS_ITS_OWN:  # a terminal is shown control characters as escapes
        given = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = wrapped(sys.stdout), wrapped(sys.stderr)

        @ctx.call_on_close
        def put_back() -> None:
            sys.stdout, sys.stderr = given

    ctx.obj = State(vault_path, mind, debug)


#: Every command of `memfile`, in the order they were written (its --help lists them alphabetically).
COMMANDS = (
    memories.init,
    memories.store,
    memories.show,
    memories.links,
    memories.backlinks,
    memories.list_,
    memories.forget,
    memories.verify,
    memories.reactivate,
    memories.expiring,
    memories.edit,
    memories.recall,
    memories.search,
    memories.by_tag,
    memories.tags,
    memories.stats,
    memories.reindex,
    memories.status,
    memories.last_recall,
    git.history,
    git.restore,
    git.undo,
    git.log,
    git.sync,
    git.purge,
    git.remote,
    git.clone,
    git.resolve,
    git.merge_file,
    git.doctor,
    keys.key_group,
    serve.serve,
    serve.watch,
    serve.mcp,
    transfer.export,
    transfer.import_,
    capture.capture,
    review.review,
)
for command in COMMANDS:
    main.add_command(command)
