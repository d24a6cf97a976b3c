"""The command line's history commands (history, restore, undo, log): a thin face over `Vault`'s History."""

from __future__ import annotations

import click

from .cli import State, _json, _print_store, json_option, main


@main.command()
@click.argument("ref")
@json_option
@click.pass_obj
def history(state: State, ref: str, as_json: bool) -> None:
    """List every version of one memory, newest first (also of a forgotten one).

    Each version shows its date, author, source, commit message, the fields it
    changed and a short diff of the body.

    Example: memfile history project/synapse_status
    """
    versions = state.vault().history(ref)
    if as_json:
        _json([v.to_dict() for v in versions])
        return
    for version in versions:
        what = "removed" if version.removed else ("unreadable: " + version.problem) if version.problem else (
            "changed " + ", ".join(version.changed) if version.changed else "created" if version is versions[-1] else "")
        click.echo(f"{version.sha[:8]}  {version.date}  {version.author}  {version.message}")
        if what:
            click.echo(f"    {what}")
        for line in version.diff.splitlines():
            click.echo(f"    {line}")


@main.command()
@click.argument("ref")
@click.option("--at", metavar="REV|DATE", help="Restore the version at this commit or date (default: the last one).")
@json_option
@click.pass_obj
def restore(state: State, ref: str, at: str | None, as_json: bool) -> None:
    """Bring back a forgotten memory, or an old version of one, as a new commit.

    Example: memfile restore context/conference_trip_march

    Example: memfile restore project/synapse_status --at HEAD~3
    """
    result = state.vault().restore(ref, at)
    _print_store(result, as_json, "restored" if result.changed else "unchanged (already that version)")


@main.command()
@json_option
@click.pass_obj
def undo(state: State, as_json: bool) -> None:
    """Revert the last change memfile made, as a new commit.

    Refused (exit 2) when a later commit or an uncommitted edit touched the
    same memory: undoing would discard that work.

    Example: memfile undo
    """
    entry = state.vault().undo()
    _json(entry.to_dict()) if as_json else click.echo(f"{entry.message} ({entry.sha[:8]})")


@main.command()
@click.option("--since", help="Only changes newer than this: a duration (7d, 12h) or a date (2026-05-01).")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many changes.")
@json_option
@click.pass_obj
def log(state: State, since: str | None, limit: int | None, as_json: bool) -> None:
    """The vault's changelog, newest first.

    Example: memfile log --since 7d
    """
    entries = state.vault().log(since, limit)
    if as_json:
        _json([e.to_dict() for e in entries])
        return
    for entry in entries:
        click.echo(f"{entry.date}  {entry.sha[:8]}  {entry.message}  [{entry.author}]")
