"""The command line's git and upkeep commands (history, restore, undo, log, sync, remote, clone, resolve, doctor)."""

from __future__ import annotations

import shlex
import sys
from typing import Any

import click

from ..errors import EXIT_PROBLEMS, EXIT_SYNC_CONFLICTS, InvalidInput, Refused
from ..vault import Vault, run_merge_driver
from .common import State, confirmed, json_option, print_json, print_store, progress_bars
from .options import CommandGroup, MemfileCommand


@click.command(cls=MemfileCommand)
@click.argument("ref")
@json_option
def history(state: State, ref: str, as_json: bool) -> None:
    """List every version of one memory, newest first (also of a forgotten one).

    Each version shows its date, author, source, commit message, the fields it
    changed and a short diff of the body.

    Example: memfile history project/synapse_status
    """
    versions = state.vault().history(ref)
    if as_json:
        print_json([v.to_dict() for v in versions])
        return
    for version in versions:
        what = (
            "removed"
            if version.removed
            else ("unreadable: " + version.problem)
            if version.problem
            else (
                "changed " + ", ".join(version.changed)
                if version.changed
                else "created"
                if version is versions[-1]
                else ""
            )
        )
        click.echo(f"{version.sha[:8]}  {version.date}  {version.author}  {version.message}")
        if what:
            click.echo(f"    {what}")
        for line in version.diff.splitlines():
            click.echo(f"    {line}")


@click.command(cls=MemfileCommand)
@click.argument("ref")
@click.option(
    "--at",
    metavar="REV|DATE",
    help="Restore the version at this commit, date (a future date: the latest) or duration back (7d) (default: the last version).",
)
@json_option
def restore(state: State, ref: str, at: str | None, as_json: bool) -> None:
    """Bring back a forgotten memory, or an old version of one, as a new commit.

    An agent's restore is the agent's memory: unverified, priority at most high.

    Example: memfile restore context/conference_trip_march

    Example: memfile restore project/synapse_status --at HEAD~3
    """
    result = state.vault().restore(ref, at)
    print_store(result, as_json, "restored" if result.changed else "unchanged (already that version)")


@click.command(cls=MemfileCommand)
@json_option
def undo(state: State, as_json: bool) -> None:
    """Revert this mind's last change made by memfile here, as a new commit.

    Another mind's changes, and what a sync merged in from another machine,
    are never undone.

    Refused (exit 2) when a later commit or an uncommitted edit touched the
    same memory: undoing would discard that work.

    Example: memfile undo
    """
    entry = state.vault().undo()
    print_json(entry.to_dict()) if as_json else click.echo(f"{entry.message} ({entry.sha[:8]})")


@click.command(cls=MemfileCommand)
@click.option("--since", help="Only changes newer than this: a duration (7d, 12h) or a date (2026-05-01).")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many changes.")
@json_option
def log(state: State, since: str | None, limit: int | None, as_json: bool) -> None:
    """The mind's changelog (the commits that changed its files), newest first.

    Example: memfile log --since 7d
    """
    entries = state.vault().log(since, limit)
    if as_json:
        print_json([e.to_dict() for e in entries])
        return
    for entry in entries:
        keys = f" key {', '.join(entry.keys)}" if entry.keys else ""
        click.echo(f"{entry.date}  {entry.sha[:8]}  {entry.message}  [{entry.author}{keys}]")


@click.command(cls=MemfileCommand)
@click.option("--remote", help="The name of the git remote to sync with (default: [sync] remote, else origin).")
@click.option("--branch", help="The remote branch (default: the current branch's name).")
@click.option("--new-branch", is_flag=True, help="Create --branch on the remote when it exists on neither side.")
@click.option(
    "--accept-purge",
    is_flag=True,
    help="Rewrite this clone's history without every purged memory (the remote's and this clone's), then sync.",
)
@json_option
def sync(
    state: State, remote: str | None, branch: str | None, new_branch: bool, accept_purge: bool, as_json: bool
) -> None:
    """Commit hand edits, fetch, merge the remote's changes, push, update the index.

    Memory files merge field by field; a body changed on both sides keeps
    both until memfile resolve, and sync then exits 8. Never force-pushes
    (--accept-purge replaces a remote branch that still holds purged versions,
    with force-with-lease); an unreachable remote changes nothing (exit 6).
    A purge on either side stops a sync and says what to run.

    Example: memfile sync --remote origin

    Example: memfile sync --accept-purge
    """
    report = state.vault().sync(remote, branch, new_branch=new_branch, accept_purge=accept_purge)
    if as_json:
        print_json(report.to_dict())
    else:
        _print_sync(report)
    if report.conflicts:
        raise SystemExit(EXIT_SYNC_CONFLICTS)


@click.command(cls=MemfileCommand)
@click.argument("refs", nargs=-1, metavar="[REF]...")
@click.option(
    "--text",
    metavar="STRING",
    help="Remove only this string (a leaked token) from every version, keeping every other byte; "
    "- reads it from standard input (out of your shell's history).",
)
@click.option("--dry-run", is_flag=True, help="Only show what would go.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask first (needed when not on a terminal).")
@click.option(
    "--push",
    is_flag=True,
    help="Then replace the history of each remote branch that still holds what went (force-with-lease); "
    "alone: push an earlier purge.",
)
@click.option("--remote", help="With --push alone: only this remote.")
@json_option
def purge(
    state: State,
    refs: tuple[str, ...],
    text: str | None,
    dry_run: bool,
    yes: bool,
    push: bool,
    remote: str | None,
    as_json: bool,
) -> None:
    """Remove memories from every version of the vault's history (people only).

    forget keeps every version in git; purge rewrites every branch, tag and
    remote-tracking branch without them, prunes what is left in .git, clears
    the index, vectors and last-recall records, and records each purge in
    .memfile-purged (id, REF, when, by whom; never the text). Other clones
    are told to run memfile sync --accept-purge. It shows what goes and asks
    first, unless --yes.

    Example: memfile purge identity/alice_home_address

    Example: echo "$LEAKED" | memfile purge --text - project/deploy_notes

    Example: memfile purge --push
    """
    vault = state.vault()
    out = as_json  # with --json, what a person reads goes to stderr
    if not refs:
        if not push:
            raise InvalidInput("REF", None, "the memories to purge (or --push alone, to push an earlier purge)")
        _push(vault, remote, dry_run, yes, as_json)
        return
    if text == "-":
        text = sys.stdin.readline().rstrip("\r\n")
    plans = [vault.purge(ref, text=text, dry_run=True) for ref in refs]
    if as_json and dry_run:
        print_json([plan.to_dict() for plan in plans])
        return
    for plan in plans:
        _show_plan(plan, out)
    if dry_run:
        return
    names = ", ".join(plan.ref for plan in plans)
    refusal = (
        f"memfile purge asks before it purges {names}, and there is no terminal to ask on; nothing was "
        "purged: pass --yes to purge, or --dry-run to only see what would go"
    )
    if not confirmed(yes, f"Purge {names}? This cannot be undone", refusal):
        click.echo("nothing was purged", err=True)
        return
    with progress_bars() as progress:
        last = len(refs) - 1
        reports = [
            vault.purge(ref, text=text, push=push and n == last, progress=progress) for n, ref in enumerate(refs)
        ]
    if as_json:
        print_json([report.to_dict() for report in reports])
    for report in reports:
        click.echo(f"purged {report.ref}: history rewritten, old objects pruned, recorded in {report.commit}", err=out)
    for name in reports[-1].pushed:
        click.echo(f"replaced the history of {name}", err=out)
    for name in reports[-1].remotes:
        click.echo(
            f"{name} still holds the purged versions: run memfile purge --push (memfile sync refuses until then)",
            err=True,
        )


def _show_plan(plan: Any, out: bool) -> None:
    goes = "the string, from" if plan.text else "every version of"
    click.echo(f"purge {goes} {plan.ref} (id {plan.id}, mind {plan.mind}):", err=out)
    click.echo(f"  {_counted(plan.versions, 'version', 'versions')} in the history of {', '.join(plan.refs)}", err=out)
    click.echo(f"  {_counted(plan.commits, 'commit', 'commits')} rewritten (each gets a new id)", err=out)
    if plan.on_disk:
        gone = "its file keeps every other byte" if plan.text else "its file is removed"
        click.echo(f"  {gone}; every other memory and its whole history are kept", err=out)
    click.echo("  recorded in .memfile-purged (id, REF, when, by whom; never the text)", err=out)


def _push(vault: Vault, remote: str | None, dry_run: bool, yes: bool, as_json: bool) -> None:
    """`purge --push` alone: replace the remote branches that still hold purged versions, after saying which."""
    held = vault.push_purge(remote, dry_run=True)
    for name in held:
        click.echo(
            f"replace the history of {name} with this clone's, without the purged versions "
            "(force-with-lease: only while it is where the purge found it)",
            err=as_json,
        )
    if not held:
        click.echo("no remote holds purged versions: nothing to push", err=True)
    refusal = (
        f"memfile purge --push asks before it replaces {', '.join(held)}, and there is no terminal to ask on; "
        "nothing was pushed: pass --yes to push, or --dry-run to only see what would change"
    )
    if not held or dry_run or not confirmed(yes, "Replace them? This cannot be undone", refusal):
        if as_json:
            print_json({"pushed": [], "held": held})
        return
    pushed = vault.push_purge(remote)
    if as_json:
        print_json({"pushed": pushed, "held": []})
    for name in pushed:
        click.echo(f"replaced the history of {name}", err=as_json)


def _counted(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def _print_sync(report: Any) -> None:
    click.echo(
        f"synced with {report.remote}/{report.branch}: {_counted(report.came_in, 'commit', 'commits')} in "
        f"({_counted(len(report.files_in), 'memory file', 'memory files')} changed), "
        f"{_counted(report.went_out, 'commit', 'commits')} out"
    )
    if report.hand_edits:
        click.echo(f"committed hand edits first ({report.hand_edits[:8]})")
    for ref in report.conflicts:
        click.echo(
            f"conflict: {ref} changed on both sides; finish it with: memfile resolve {ref} --ours|--theirs|--edit"
        )
    for entry in report.kept_ours:
        click.echo(f"kept {entry}: git could not merge it; the other version is in the merge (see: memfile history)")
    if report.clone_command:
        click.echo(f"created {report.branch} on {report.remote}; on another machine: {report.clone_command}")


@click.group(cls=CommandGroup)
def remote() -> None:
    """Manage the git remotes a vault syncs with.

    Example: memfile remote add git@example.com:me/mind.git
    """


@remote.command(name="add")
@click.argument("url")
@click.option("--name", default="origin", show_default=True, help="The remote's name (another one when origin exists).")
@click.pass_obj
def remote_add(state: State, url: str, name: str) -> None:
    """Add a remote (plain `git remote add` works too).

    Example: memfile remote add /srv/git/mind.git --name origin
    """
    state.vault().add_remote(url, name)
    click.echo(f"added remote {name} {url}; sync with: memfile sync --remote {name}")


@click.command(cls=MemfileCommand)
@click.argument("url")
@click.argument("path", type=click.Path(file_okay=False))
@click.option("--mind", help="The mind to open first (default: as for every command; every mind is cloned).")
@json_option
def clone(state: State, url: str, path: str, mind: str | None, as_json: bool) -> None:
    """Clone a vault onto this machine: its minds, the merge driver, the index; then sync as usual.

    Finds the branch memfile pushed whatever branch the remote's HEAD names.
    PATH must not exist yet, or be an empty folder.

    Example: memfile clone git@example.com:me/mind.git ~/memory
    """
    from ..paths import MIND_PATTERN, mind_dirs

    vault = Vault.clone(url, path, mind or state.mind)
    state.opened.append(vault)
    names = [m for m in mind_dirs(vault.root) if MIND_PATTERN.fullmatch(m)]
    minds: list[dict[str, Any]] = []
    for name in names:
        if name == vault.mind:
            minds.append({"mind": name, "name": vault.name, "memories": len(vault.memories())})
            continue
        with Vault.open(vault.root, name) as other:  # its index is built now, as the first mind's was
            state.opened.append(other)  # its unreadable files are named like the first mind's
            minds.append({"mind": name, "name": other.name, "memories": len(other.memories())})
    upstream = (vault.status()["git"] or {}).get("upstream")
    chosen = "" if names == [vault.mind] or vault.config.default_mind == vault.mind else f" --mind {vault.mind}"
    data = {
        "vault": str(vault.root),
        "url": url,
        "branch": upstream.split("/", 1)[1] if upstream else None,
        "upstream": upstream,
        "mind": vault.mind,
        "minds": minds,
        "next": f"cd {shlex.quote(str(vault.root))} && memfile{chosen} recall",
    }
    if as_json:
        print_json(data)
        return
    click.echo(f"cloned {url} into {vault.root} (branch {data['branch']}, tracking {upstream})")
    for entry in minds:
        click.echo(f"  {entry['mind']}: {entry['name']}, {_counted(entry['memories'], 'memory', 'memories')}")
    click.echo(f"next: {data['next']}  (then memfile sync to exchange changes)")


@click.command(cls=MemfileCommand)
@click.argument("ref")
@click.option("--ours", is_flag=True, help="Keep this machine's text.")
@click.option("--theirs", is_flag=True, help="Take the other side's text.")
@click.option("--edit", is_flag=True, help="Edit both into one in $EDITOR.")
@json_option
def resolve(state: State, ref: str, ours: bool, theirs: bool, edit: bool, as_json: bool) -> None:
    """Finish a memory whose body changed on both sides of a sync, in one commit.

    --ours is this machine's text on every machine, also on one that pulled
    the conflict from another.

    Example: memfile resolve project/roadmap --theirs
    """
    chosen = [name for name, on in (("--ours", ours), ("--theirs", theirs), ("--edit", edit)) if on]
    if len(chosen) > 1:
        raise InvalidInput("resolve options", " ".join(chosen), "exactly one of --ours, --theirs, --edit")
    vault = state.vault()
    if edit:
        edited = click.edit(vault.resolve_draft(ref), extension=".md")
        if edited is None:
            raise Refused(
                "the editor was closed without saving; nothing changed (save the file to resolve "
                f"with it, or pass --ours or --theirs): memfile resolve {ref} --edit"
            )
        result = vault.resolve(ref, content=edited)
    else:
        result = vault.resolve(ref, "ours" if ours else "theirs" if theirs else None)
    print_store(result, as_json, "resolved")


@click.command(name="merge-file", cls=MemfileCommand, hidden=True)
@click.argument("base", type=click.Path(dir_okay=False))
@click.argument("ours", type=click.Path(dir_okay=False))
@click.argument("theirs", type=click.Path(dir_okay=False))
@click.argument("path")
def merge_file(base: str, ours: str, theirs: str, path: str) -> None:
    """git's merge driver for memory files (set up by init and sync); not for people.

    Example: memfile merge-file BASE OURS THEIRS mind/fact/x.md
    """
    raise SystemExit(run_merge_driver(base, ours, theirs, path))


@click.command(cls=MemfileCommand)
@click.option(
    "--fix",
    is_flag=True,
    help="Apply the safe repairs (index, hand edits, temp files, store-queue leftovers, stale git lock, "
    "misplaced files).",
)
@json_option
def doctor(state: State, fix: bool, as_json: bool) -> None:
    """Check the mind: unreadable or duplicate files, misplaced files, conflicts, index, git; exit 5 on problems.

    Example: memfile doctor --fix
    """
    with progress_bars() as progress:
        report = state.vault().doctor(fix=fix, progress=progress)
    if as_json:
        print_json(report.to_dict())
    else:
        for line in report.fixed:
            click.echo(f"fixed: {line}")
        for finding in report.findings:
            click.echo(f"{'problem' if finding.problem else 'info'}: {finding.kind}: {finding.message}")
        click.echo(f"{len(report.problems)} problems" if report.problems else "no problems")
    if report.problems:
        raise SystemExit(EXIT_PROBLEMS)
