"""The command line's `memfile export` and `memfile import`: memories in and out of a mind."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..errors import EXIT_CONFLICT, InvalidInput
from .common import State, json_option, print_json, progress_bars
from .options import MemfileCommand

#: How many refs of each kind an import lists before "... and N more" (--json lists them all).
SHOWN = 20


def _mind(state: State, mind: str | None) -> State:
    """The command's own --mind, else the one given before the command (`memfile --mind M import`)."""
    if mind is not None:
        state.mind = mind
    return state


@click.command(cls=MemfileCommand)
@click.option("--mind", metavar="NAME", help="The mind to export (default: the one memfile chooses).")
@click.option("--all-minds", is_flag=True, help="Export every mind of the vault.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "json"]),
    default="jsonl",
    show_default=True,
    help="jsonl: memfile's export (every field; import reads it back); json: a plain array of Synapse-shaped memories.",
)
@click.option("--raw", is_flag=True, help="Include each file's exact text and sha256: an import writes the same bytes.")
@click.option("-o", "--output", metavar="FILE", help="Write to FILE (replaced once whole) instead of standard output.")
@json_option
def export(
    state: State, mind: str | None, all_minds: bool, fmt: str, raw: bool, output: str | None, as_json: bool
) -> None:
    """Export the mind's memories, every one (expired and superseded ones marked).

    memfile's format is JSON Lines: a header, one line per memory with every
    field under Synapse's names (mind_id), one line per file memfile could not
    read (also named on standard error), and an end line with the count, so a
    file cut short is refused on import. A full backup with history is git's
    job: git bundle create vault.bundle --all.

    Example: memfile export --raw -o memories.jsonl

    Example: memfile export --format json --all-minds > synapse.json
    """
    if mind is not None and all_minds:
        raise InvalidInput("--mind", mind, "--mind NAME or --all-minds, not both")
    if as_json and output is None:
        raise InvalidInput("--json", "without -o", "--json with -o FILE (the export itself goes to standard output)")
    vault = _mind(state, mind).vault()
    report = vault.export(output if output is not None else sys.stdout, all_minds=all_minds, format=fmt, raw=raw)
    vault.issues = []  # named below, for every mind exported
    for line in report.unreadable:
        click.echo(f"memfile: not exported: {line}", err=True)
    if as_json:
        print_json(report.to_dict() | {"output": output})
        return
    minds = ", ".join(report.minds)
    summary = f"exported {report.count} memories of {'minds' if len(report.minds) > 1 else 'mind'} {minds}"
    click.echo(f"{summary} to {output}" if output is not None else summary, err=output is None)


@click.command(name="import", cls=MemfileCommand)
@click.argument("file", metavar="FILE")
@click.option("--mind", metavar="NAME", help="The mind to import into (default: the one memfile chooses).")
@click.option(
    "--from",
    "format",
    type=click.Choice(["memfile", "synapse", "langbot", "openclaw"]),
    help="The file's format (default: told from the file).",
)
@click.option(
    "--on-conflict",
    type=click.Choice(["skip", "newer", "overwrite"]),
    default="newer",
    show_default=True,
    help="A memory here with the same id and other content: keep it, take the newer (updated_at), or replace it.",
)
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option("--from-mind", metavar="NAME", help="The mind to take from an export of several minds.")
@click.option(
    "--split",
    type=click.Choice(["sections", "bullets", "file"]),
    default="sections",
    show_default=True,
    help="OpenClaw MEMORY.md and USER.md: one memory per ## section, per top-level list item, or the whole file.",
)
@click.option(
    "--category",
    metavar="NAME",
    help="OpenClaw: the category of MEMORY.md's memories (default: guessed from headings).",
)
@click.option("--include-dreams", is_flag=True, help="OpenClaw: import DREAMS.md too.")
@click.option(
    "--max-priority",
    type=click.Choice(["high", "critical"]),
    default="high",
    show_default=True,
    help="LangBot: the priority of importance 5 (critical memories are pinned into every recall).",
)
@click.option(
    "--source",
    "source_as",
    type=click.Choice(["user", "agent"]),
    help="LangBot: who the profiles come from (default agent: LangBot's agent tools write them).",
)
@click.option("--allow-secret", is_flag=True, help="Import contents that look like tokens or keys (people only).")
@json_option
def import_(state: State, file: str, mind: str | None, as_json: bool, **options: Any) -> None:
    """Import memories from FILE into the mind as one commit, or nothing at all.

    FILE is memfile's export, Synapse's JSON (an array or {"memories": [...]}),
    a LangBot profiles or episodes export, or OpenClaw's MEMORY.md, USER.md,
    a daily note or its workspace folder; - reads standard input (up to 512
    MB, as a file). A record that fails stops the
    import with its number and reason, and nothing is written. Ids, dates and
    unknown keys are kept; importing the same file twice changes nothing. The
    same category/key under another id is a conflict: reported, never merged
    (exit 4 after the rest is imported). An agent's import lands unverified.
    A record that looks like it holds a secret (a token, a key) stops it too.

    Example: memfile import memories.jsonl --dry-run

    Example: memfile import ~/openclaw/workspace --from openclaw --split bullets
    """
    source = sys.stdin.buffer if file == "-" else file
    vault = _mind(state, mind).vault()
    with progress_bars() as progress:
        report = vault.import_(source, progress=progress, **options)
    if as_json:
        print_json(report.to_dict())
    else:
        _print_import(report.to_dict(), on_stderr=vault.notices)
    if report.conflicts:
        click.get_current_context().exit(EXIT_CONFLICT)


def _print_import(report: dict[str, Any], on_stderr: list[str]) -> None:
    """The report for a person; the notices that go to stderr anyway (`Vault.notices`) are not repeated."""
    verb = "would import" if report["dry_run"] else "imported"
    click.echo(
        f"{verb} into mind {report['mind']} from {report['file']} ({report['format']}): "
        f"{len(report['created'])} created, {len(report['updated'])} updated, {report['unchanged']} unchanged, "
        f"{len(report['skipped'])} skipped, {len(report['conflicts'])} conflicts"
        + (f"; commit {report['commit'][:8]}" if report["commit"] else "")
        + ("; dry run: nothing written" if report["dry_run"] else "")
    )
    for kind in ("created", "updated"):
        refs = report[kind]
        for ref in refs[:SHOWN]:
            click.echo(f"  {kind:<9}{ref}")
        if len(refs) > SHOWN:
            click.echo(f"  {kind:<9}... and {len(refs) - SHOWN} more (--json lists them all)")
    for kind in ("skipped", "conflicts"):
        for entry in report[kind]:
            click.echo(f"  {kind.rstrip('s'):<9}record {entry['record']} {entry['ref']}: {entry['reason']}")
    for line in report["unmapped"]:
        click.echo(f"  unmapped {line}")
    for line in report["notices"]:
        if line not in on_stderr:
            click.echo(f"  note     {line}")
