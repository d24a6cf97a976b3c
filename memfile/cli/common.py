"""What the command line's commands share: the State a command gets its Vault from, JSON output, the
lines a changed memory prints, and progress bars.

The group (`memfile`, in memfile/cli/__init__.py) makes the State; the command modules beside this one
(memories, git, keys, review, serve, transfer) take it and these helpers from here, never from the group.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import click

from ..errors import InvalidInput, Refused
from ..model import Progress, StoreResult
from ..terminal import unshown
from ..vault import Vault

#: The distribution to install (the name `memfile` on the package index is another project).
DISTRIBUTION = "memfile-vault"
#: How a command gets its Vault: `Vault.open(--vault, --mind)` in process; a server's own (cli_served.py).
Opener = Callable[[str | None, str | None], Vault]


@dataclass
class State:
    vault_path: str | None
    mind: str | None
    debug: bool
    opener: Opener = Vault.open
    opened: list[Vault] = field(default_factory=list)

    def vault(self) -> Vault:
        if not self.opened:
            self.opened.append(self.opener(self.vault_path, self.mind))
        return self.opened[0]


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def json_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--json` ("Print JSON for programs.") and the State passed first: every command with one has both."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for programs.")(click.pass_obj(command))


def print_store(result: StoreResult, as_json: bool, verb: str) -> None:
    if as_json:
        print_json(
            result.memory.to_dict()
            | {
                "created": result.created,
                "changed": result.changed,
                "commit": result.commit,
                "superseded": result.superseded.to_dict() if result.superseded else None,
            }
        )
        return
    click.echo(f"{verb} {result.memory.id} {result.memory.path}")
    if result.superseded is not None:
        click.echo(f"superseded {result.superseded.id} {result.superseded.path}")


@contextmanager
def progress_bars() -> Iterator[Progress]:
    """A long verb's `progress` drawn as a bar per step on stderr, when that is a terminal (a pipe gets none)."""
    err, hidden = unshown(sys.stderr), not sys.stderr.isatty()
    with ExitStack() as drawn:
        bars: list[Any] = []

        def progress(name: str, done: int, total: int) -> None:
            if not bars or (bars[-1].label, bars[-1].length) != (name, total):
                drawn.close()  # the step before ends its line
                bars.append(drawn.enter_context(click.progressbar(length=total, label=name, file=err, hidden=hidden)))
            bars[-1].update(done - bars[-1].pos)

        yield progress


def confirmed(yes: bool, question: str, without_terminal: str) -> bool:
    """Whether to go on: `--yes`, else the person's answer on a terminal. Without a terminal and `--yes`
    it is refused (`without_terminal`: what was not done, and what to pass)."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise Refused(without_terminal)
    return click.confirm(question, err=True)


def run_editor(
    command: str, ref: str, instead: str, *, filename: str | None = None, text: str | None = None
) -> str | None:
    """$VISUAL or $EDITOR (else the system's editor, on a terminal) on `filename` (None then), or on `text`: the
    edited text, None when it was not saved (`click.edit`). `command` (`memfile edit`) and `ref` make the command
    line the refusals show; `instead`: how to do without an editor.

    Raises:
        Refused: no EDITOR and no terminal for the system's editor (it would draw its screen into a pipe).
        InvalidInput: the editor could not be started or failed (`EDITOR` named).
    """
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor and not all(stream is not None and stream.isatty() for stream in (sys.stdin, sys.stdout)):
        raise Refused(  # the system's editor would draw its screen into a pipe or a file, then fail
            f"{command} has no EDITOR set and no terminal for the system's editor: set EDITOR "
            f"(EDITOR=nano {command} {ref}), {instead}"
        )
    try:
        if filename is not None:
            click.edit(filename=filename)
            return None
        return click.edit(text or "", extension=".md")
    except click.ClickException as exc:
        if not editor:
            raise InvalidInput(
                "EDITOR",
                "unset",
                f"the editor to open memories with, e.g. EDITOR=nano {command} REF",
                reason=f"no editor could be started: {exc.message}",
            ) from None
        raise InvalidInput(
            "EDITOR", editor, "a command that opens the file and exits with status 0", reason=exc.message
        ) from None
