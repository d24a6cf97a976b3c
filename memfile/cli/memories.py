"""The command line's memory commands: init, store, show, list, forget, verify, reactivate, expiring,
edit, recall, search, by-tag, tags, stats, reindex, status, last-recall, links and backlinks."""

from __future__ import annotations

import json
import re
import sys
from typing import TYPE_CHECKING, Any

import click

from ..config import environ
from ..errors import FileParseError, InvalidInput
from ..model import Memory, format_datetime, step
from ..vault import Vault
from .common import State, confirmed, json_option, print_json, print_store, progress_bars, run_editor
from .options import MemfileCommand

if TYPE_CHECKING:
    from ..links import ResolvedLink


@click.command(cls=MemfileCommand)
@click.argument("path", type=click.Path(file_okay=False))
@click.option("--mind", "mind", default="default", show_default=True, help="Folder name of the first mind.")
@click.option("--name", help="Display name of the mind, shown by recall.")
@json_option
def init(state: State, path: str, mind: str, name: str | None, as_json: bool) -> None:
    """Create a vault: memfile.toml, a mind folder, .gitignore and a git repository.

    Example: memfile init ~/memory --mind michael --name "Michael's Mind"
    """
    vault = Vault.init(path, mind, name)
    state.opened.append(vault)
    if as_json:
        print_json({"vault": str(vault.root), "mind": vault.mind, "name": vault.name})
    else:
        click.echo(f"created vault {vault.root} with mind {vault.mind} ({vault.name})")


def _read_content(content: str | None) -> str:
    if content not in (None, "-"):
        return content
    stream = sys.stdin
    if stream is None or stream.isatty():
        raise click.UsageError(
            "no CONTENT given: pass the text as the CONTENT argument, or pipe it on stdin "
            "(echo TEXT | memfile store CATEGORY KEY)"
        )
    data = stream.buffer.read() if hasattr(stream, "buffer") else stream.read().encode("utf-8", "surrogateescape")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            "content",
            f"stdin (byte {exc.start}: {data[exc.start : exc.start + 1]!r})",
            "UTF-8 text",
            reason="what was piped is not valid UTF-8",
        ) from None


@click.command(cls=MemfileCommand)
@click.argument("category")
@click.argument("key")
@click.argument("content", required=False)
@click.option("--priority", help="low, normal (default), high or critical.")
@click.option("--tag", "tags", multiple=True, help="A tag; repeat it, or separate tags with commas.")
@click.option("--confidence", help="0.0 to 1.0 (default 1.0 for user, 0.7 for agent).")
@click.option("--expires", help="When it leaves recall: 30m, 12h, 7d, 2w, an ISO-8601 date, or never.")
@click.option("--source", help="user (default) or agent; MEMFILE_SOURCE=agent for agents.")
@click.option(
    "--supersedes", metavar="REF", help="An older memory this one replaces: marked superseded in the same commit."
)
@click.option("--allow-secret", is_flag=True, help="Store it though it looks like a token or key (people only).")
@json_option
def store(
    state: State,
    category: str,
    key: str,
    content: str | None,
    tags: tuple[str, ...],
    expires: str | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Store a memory, or update the one with the same CATEGORY and KEY.

    CONTENT comes from the argument, or from stdin when omitted or "-".
    With --supersedes the old memory stays on disk, marked `status: superseded`,
    and leaves recall and search (bring it back with `memfile reactivate`).

    Example: memfile store project synapse_status "v1.5.0 deployed" --priority high --tag synapse

    Example: memfile store identity user_city "Lives in Hamburg" --supersedes identity/user_location
    """
    if tags:  # none given keeps an updated memory's tags, as no --expires keeps its expiry
        options["tags"] = tags
    if expires is not None:
        options["expires"] = expires
    result = state.vault().store(category, key, _read_content(content), **options)
    print_store(result, as_json, "stored" if result.created else "updated" if result.changed else "unchanged")


def _show_text(memory: Memory) -> str:
    lines = [
        f"id: {memory.id}",
        f"category: {memory.category}",
        f"key: {memory.key}",
        f"priority: {memory.priority}",
        f"tags: {', '.join(memory.tags)}",
        f"source: {memory.source}",
        f"verified: {str(memory.verified).lower()}",
        f"confidence: {memory.confidence:g}",
        f"expires_at: {format_datetime(memory.expires_at) if memory.expires_at else 'never'}",
        f"created_at: {format_datetime(memory.created_at)}",
        f"updated_at: {format_datetime(memory.updated_at)}",
        *([f"status: {memory.status}"] if memory.status else []),
        *([f"superseded_by: {memory.superseded_by or ''}"] if memory.status and not memory.proposed else []),
        f"path: {memory.path}",
    ]
    lines += [f"{name}: {_shown_value(value)}" for name, value in memory.extra]
    return "\n".join(lines) + "\n\n" + memory.content


def _shown_value(value: Any) -> str:
    """An unknown front-matter key's value as a person reads it: a list or a map in JSON, not Python's repr."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


@click.command(cls=MemfileCommand)
@click.argument("ref")
@click.option("--at", metavar="REV|DATE", help="The version at a commit (sha, HEAD~2), a date (2026-05-01) or 7d ago.")
@json_option
def show(state: State, ref: str, at: str | None, as_json: bool) -> None:
    """Print one memory. REF is an id, category/key, or a key unique in the mind.

    Example: memfile show project/synapse_status

    Example: memfile show project/synapse_status --at 7d
    """
    vault = state.vault()
    if at is not None:
        memory = vault.show_at(ref, at)
        print_json(memory.to_dict()) if as_json else click.echo(_show_text(memory))
        return
    linked = vault.linked(ref)
    if as_json:
        print_json(linked.to_dict())
        return
    text = _show_text(linked.memory)
    for title, resolved, incoming in (("links", linked.links, False), ("backlinks", linked.backlinks, True)):
        if resolved:
            text = text.rstrip("\n") + f"\n\n--- {title}\n" + "\n".join(_link_lines(resolved, incoming))
    click.echo(text)


def _link_lines(resolved: list[ResolvedLink], incoming: bool) -> list[str]:
    """One line per link: its relation, the memory at its other end (or what it leads to: nothing), its line."""
    lines = []
    for link in resolved:
        relation = link.link.relation or "links_to"
        if incoming:
            lines.append(f"{link.source.ref:<40} {relation:<16} line {link.link.line}")
        elif link.memory is not None and link.status == "resolved":
            lines.append(f"{link.memory.ref:<40} {relation:<16} line {link.link.line}")
        else:
            lines.append(f"{'(' + link.status + ')':<40} {relation:<16} line {link.link.line}: {link.note}")
    return lines


@click.command(cls=MemfileCommand)
@click.argument("ref")
@json_option
def links(state: State, ref: str, as_json: bool) -> None:
    """List the wiki links a memory's text makes: [[key]], [[category/key|shown]], - relation [[key]].

    Each line: the memory it leads to (a superseded one's successor), its relation (links_to when the
    line gives none) and its line in the text; a link to nothing says why (missing, ambiguous,
    other_mind, invalid). See docs/format.md, "Links".

    Example: memfile links project/synapse_status --json
    """
    _print_links(state.vault().links(ref), as_json, False, "no links")


@click.command(cls=MemfileCommand)
@click.argument("ref")
@json_option
def backlinks(state: State, ref: str, as_json: bool) -> None:
    """List the memories whose wiki links lead to this one, with their relation and line.

    Example: memfile backlinks identity/alice
    """
    _print_links(state.vault().backlinks(ref), as_json, True, "no backlinks")


def _print_links(resolved: list[ResolvedLink], as_json: bool, incoming: bool, empty: str) -> None:
    if as_json:
        print_json([link.to_dict() for link in resolved])
    elif not resolved:
        click.echo(empty, err=True)
    else:
        click.echo("\n".join(_link_lines(resolved, incoming)))


def _print_memories(memories: list[Memory], as_json: bool, empty: str, date: str | None = None) -> None:
    """One line per memory, after the Memory field `date` when given (`expires_at`, `updated_at`)."""
    if as_json:
        print_json([m.to_dict() for m in memories])
        return
    if not memories:
        click.echo(empty, err=True)
    for memory in memories:
        state = "proposed" if memory.proposed else "verified" if memory.verified else "unverified"
        line = f"{memory.ref:<42} {memory.priority:<8} {state:<10} {memory.path}"
        click.echo(f"{format_datetime(getattr(memory, date))}  {line}" if date else line)


@click.command(name="list", cls=MemfileCommand)
@click.option("--category", help="Only this category.")
@click.option("--tag", "tags", multiple=True, help="Only memories with this tag (repeat: all of them).")
@click.option("--priority", help="Only this priority.")
@click.option("--source", help="Only user or only agent memories.")
@click.option("--unverified", is_flag=True, help="Only unverified memories.")
@click.option("--include-expired", is_flag=True, help="Also expired memories.")
@click.option(
    "--status",
    default="active",
    show_default=True,
    help="active, superseded, proposed (captured, waiting for review: memfile review) or all.",
)
@json_option
def list_(state: State, as_json: bool, **filters: Any) -> None:
    """List the mind's memories, filtered.

    Example: memfile list --category project --tag synapse --unverified

    Example: memfile list --status superseded
    """
    memories = state.vault().list(**filters)
    _print_memories(memories, as_json, "no memories match")


@click.command(cls=MemfileCommand)
@click.argument("ref", required=False)
@click.option("--tag", help="Only memories with this tag.")
@click.option("--category", help="Only this category.")
@click.option("--source", help="Only user or only agent memories (an agent: only its own).")
@click.option("--unverified", is_flag=True, help="Only unverified memories.")
@click.option("--older-than", metavar="DURATION", help="Only memories not updated for this long: 30m, 12h, 30d, 2w.")
@click.option("--expired", is_flag=True, help="Only memories whose expires_at has passed.")
@click.option("--dry-run", is_flag=True, help="List what would be forgotten; write nothing.")
@click.option("--yes", is_flag=True, help="Forget without asking (needed without a terminal).")
@json_option
def forget(state: State, ref: str | None, as_json: bool, dry_run: bool, yes: bool, **filters: Any) -> None:
    """Remove a memory, or every memory the filters select, in one commit (git history keeps them).

    The filters combine: a memory must pass each one given. The list is shown first; then memfile asks,
    unless --yes. An agent (MEMFILE_SOURCE=agent) forgets only its own unverified memories: a person's,
    a verified or a critical memory is left out. See docs/forget.md.

    Example: memfile forget context/conference_trip_march

    Example: memfile forget --tag synapse --older-than 30d --dry-run
    """
    given = {name: value for name, value in filters.items() if value}
    if ref is not None and given:
        raise click.UsageError("give a REF or filters (--tag, --category, ...), not both")
    if ref is not None and not dry_run:
        memory = state.vault().forget(ref)
        print_json(memory.to_dict()) if as_json else click.echo(f"forgot {memory.id} {memory.path}")
        return
    if not given and ref is None:
        raise click.UsageError(
            "give a REF, or at least one filter: --tag, --category, --source, --unverified, --older-than, --expired"
        )
    vault = state.vault()
    plan = vault.forget_many(refs=[ref] if ref else None, **given, dry_run=True)
    if not as_json:
        _print_memories(plan.forgotten, False, "no memory matches: nothing to forget")
        _print_left_out(plan.left_out)
    if dry_run or not plan.forgotten:
        if as_json:
            print_json(plan.to_dict() | {"dry_run": dry_run})
        elif dry_run:
            click.echo(f"dry run: would forget {_count(plan.forgotten)}; nothing was written")
        return
    refusal = (
        f"memfile forget asks before it forgets {_count(plan.forgotten)}, and there is no terminal to "
        "ask on; nothing was forgotten: pass --yes to forget them, or --dry-run to only list them"
    )
    if not confirmed(yes, f"Forget these {_count(plan.forgotten)}?", refusal):
        click.echo("nothing was forgotten", err=True)
        return
    report = vault.forget_many(refs=[m.path for m in plan.forgotten], **given)  # only what was shown
    if as_json:  # what the filters matched and the caller may not forget: the first selection's
        print_json(report.to_dict() | {"left_out": [m.to_dict() for m in plan.left_out]})
    else:
        click.echo(f"forgot {_count(report.forgotten)} in one commit ({(report.commit or '')[:8]})")


def _count(memories: list[Memory]) -> str:
    return f"{len(memories)} {'memory' if len(memories) == 1 else 'memories'}"


def _print_left_out(memories: list[Memory]) -> None:
    if memories:
        click.echo(
            f"left out {_count(memories)} an agent may not forget (a person's, verified or critical): "
            + ", ".join(m.ref for m in memories),
            err=True,
        )


@click.command(cls=MemfileCommand)
@click.argument("ref")
@json_option
def verify(state: State, ref: str, as_json: bool) -> None:
    """Mark a memory as checked by a person (agents cannot).

    Example: memfile verify project/project_synapse_status
    """
    result = state.vault().verify(ref)
    print_store(result, as_json, "verified" if result.changed else "already verified")


@click.command(cls=MemfileCommand)
@click.argument("ref")
@json_option
def reactivate(state: State, ref: str, as_json: bool) -> None:
    """Bring a superseded memory back into recall and search (status: active).

    Example: memfile reactivate identity/user_location
    """
    result = state.vault().reactivate(ref)
    print_store(result, as_json, "reactivated" if result.changed else "not superseded, unchanged")


@click.command(cls=MemfileCommand)
@click.option("--within", default="7d", show_default=True, help="A duration: 30m, 12h, 7d, 2w.")
@json_option
def expiring(state: State, within: str, as_json: bool) -> None:
    """List memories that expire soon, soonest first.

    Example: memfile expiring --within 2w
    """
    memories = state.vault().expiring(within)
    _print_memories(memories, as_json, f"no memory expires within {within}", "expires_at")


@click.command(cls=MemfileCommand)
@click.argument("ref")
@json_option
def edit(state: State, ref: str, as_json: bool) -> None:
    """Open a memory in $EDITOR; afterwards validate and commit it.

    Example: EDITOR=nano memfile edit preference/answer_style
    """
    vault = state.vault()
    before, path = vault.begin_edit(ref)
    for notice in vault.notices:  # the next call's notices replace them
        click.echo(f"memfile: {notice}", err=True)
    instead = f"or change the memory with: memfile store {before.category} {before.key} TEXT"
    run_editor("memfile edit", before.ref, instead, filename=str(path))
    try:
        result = vault.finish_edit(before)
    except FileParseError as exc:
        raise FileParseError(
            exc.path, exc.line, f"{exc.reason}; your edit is kept as it is in {path}, not committed"
        ) from None
    print_store(result, as_json, "edited" if result.changed else "unchanged")


@click.command(cls=MemfileCommand)
@click.option("--query", "-q", help="What the agent is working on: pinned memories, then the best matches.")
@click.option("--budget", type=int, help="Most tokens the output may take (estimate: characters / 4); 0 = no limit.")
@click.option("--limit", type=int, default=10, show_default=True, help="With --query: most matches besides the pinned.")
@click.option("--include-superseded", is_flag=True, help="Also memories marked superseded.")
@click.option(
    "--include-proposed",
    is_flag=True,
    help="Also captured memories waiting for review, marked [proposed] (people only: memfile review).",
)
@click.option("--with-mind", "with_minds", multiple=True, help="Also read this mind (repeat), read-only.")
@click.option("--semantic/--lexical", default=None, help="With --query: matches by meaning too (as search).")
@click.option(
    "--at", metavar="REV|DATE", help="The mind as it was at a commit (sha, HEAD~2), a date (2026-05-01) or 30d ago."
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_obj
def recall(state: State, budget: int | None, fmt: str, **options: Any) -> None:
    """Print the prioritized summary an agent puts in its context window.

    Without --query: every memory, critical first, then newest first. With
    --query: the verified critical memories and verified high identity and
    preference ones (pinned), then the best matches ranked by relevance, priority, recency (half-life
    decay), confidence and verified; --format json shows each score's parts. --with-mind
    adds another mind's memories (a group chat's mind with its speaker's), each labelled.
    --at recalls the mind as it was then, read from git (nothing is checked out). --include-proposed
    shows a person the captured memories waiting for review among the others, marked [proposed] (not
    recorded as the agent's last recall; an agent's recall never holds them).

    Example: memfile --vault sample_vault recall --budget 500

    Example: memfile recall --at 2026-05-01 --query "deploy synapse"

    Example: memfile --mind group_a recall --with-mind alice --query "deploy synapse to vps1" --budget 800
    """
    if budget is not None:  # none given: the mind's [recall] budget
        options["budget"] = budget
    report = state.vault().recall(**options)
    print_json(report.to_dict()) if fmt == "json" else click.echo(report.encode(), nl=False)


@click.command(cls=MemfileCommand)
@click.argument("query", nargs=-1, required=True)
@click.option("--tag", "tags", multiple=True, help="Only memories with this tag (repeat: all of them).")
@click.option("--category", help="Only this category.")
@click.option("--priority", help="Only this priority.")
@click.option("--source", help="Only user or only agent memories.")
@click.option("--unverified", is_flag=True, help="Only unverified memories.")
@click.option("--include-expired", is_flag=True, help="Also expired memories.")
@click.option("--include-superseded", is_flag=True, help="Also memories marked superseded.")
@click.option("--include-proposed", is_flag=True, help="Also captured memories waiting for review (memfile review).")
@click.option("--limit", type=int, default=10, show_default=True, help="Most hits to show.")
@click.option(
    "--semantic/--lexical",
    default=None,
    help="Also by meaning, fused with the words (the semantic extra); default: [search] semantic.",
)
@click.option(
    "--at", metavar="REV|DATE", help="Search the mind as it was at a commit (sha, HEAD~2), a date or 30d ago."
)
@json_option
def search(state: State, query: tuple[str, ...], as_json: bool, **filters: Any) -> None:
    """Search the mind's memories, best match first.

    Words match loosely (accents, case, endings ignored); "a phrase", AND/OR/NOT,
    prefix*, tag:NAME, category:NAME work too. --semantic also finds a paraphrase
    or another language once embedded (memfile reindex --semantic). --json gives
    a hit's first 1,000 characters (content_cut, content_chars); show, all of it.

    Example: memfile search what did we deploy on vps1?

    Example: memfile search --semantic "what does she do for a living?"

    Example: memfile search --at 30d vps1
    """
    hits = state.vault().search(" ".join(query), **filters)
    if as_json:
        print_json([hit.to_dict() for hit in hits])
        return
    if not hits:
        click.echo("no memory matches", err=True)
    bold = sys.stdout.isatty() and not environ().get("NO_COLOR")  # no-color.org: set and not empty
    for hit in hits:
        snippet = (
            re.sub(r"\*\*(.+?)\*\*", lambda m: click.style(m.group(1), bold=True), hit.snippet) if bold else hit.snippet
        )
        proposed = ", proposed: memfile review" if hit.memory.proposed else ""
        click.echo(f"{hit.rank:>2}. {hit.memory.ref}  ({hit.memory.priority}{proposed}, score {hit.score:.2f})")
        click.echo(f"    {snippet}")
        click.echo(f"    {hit.memory.path}")


@click.command(name="by-tag", cls=MemfileCommand)
@click.argument("tag")
@click.option("--include-expired", is_flag=True, help="Also expired memories.")
@json_option
def by_tag(state: State, tag: str, include_expired: bool, as_json: bool) -> None:
    """List the memories carrying TAG (any case), newest first.

    Example: memfile by-tag docker
    """
    memories = state.vault().by_tag(tag, include_expired=include_expired)
    _print_memories(memories, as_json, f"no memory has the tag {tag!r}", "updated_at")


@click.command(cls=MemfileCommand)
@json_option
def tags(state: State, as_json: bool) -> None:
    """List the mind's tags with how many memories carry each.

    Example: memfile tags
    """
    counted = state.vault().tags()
    if as_json:
        print_json([{"tag": tag, "count": count} for tag, count in counted])
        return
    for tag, count in counted:
        click.echo(f"{count:>6}  {tag}")


@click.command(cls=MemfileCommand)
@json_option
def stats(state: State, as_json: bool) -> None:
    """Show counts of the mind's memories and facts about its index.

    Example: memfile stats --json
    """
    data = state.vault().stats()
    if as_json:
        print_json(data.to_dict())
        return
    click.echo(f"Mind: {data['name']} ({data['mind']})")
    click.echo(
        f"Memories: {data['total']} ({data['verified']} verified, {data['unverified']} unverified, "
        f"{data['expired']} expired, {data['superseded']} superseded, {data['unreadable_files']} unreadable files)"
    )
    if data["proposed"]:
        click.echo(f"Waiting for review: {data['proposed']} captured (memfile review)")
    for group in ("by_category", "by_priority", "by_source"):
        click.echo(f"{group.replace('_', ' ').capitalize()}: " + ", ".join(f"{k} {v}" for k, v in data[group].items()))
    click.echo(f"Index: {data['index_bytes'] / 1024:.0f} KiB, last updated {data['last_index_update'] or 'never'}")


@click.command(cls=MemfileCommand)
@click.option("--semantic", is_flag=True, help="Also embed what is not embedded yet (the semantic extra).")
@json_option
def reindex(state: State, semantic: bool, as_json: bool) -> None:
    """Rebuild the search index of the mind from its files.

    --semantic also embeds the memories not embedded yet (the semantic extra),
    for memfile search --semantic.

    Example: memfile reindex

    Example: memfile reindex --semantic
    """
    vault = state.vault()
    with progress_bars() as progress:
        report = vault.reindex(progress=step(progress, "indexing"))
        embedded = vault.embed(progress=step(progress, "embedding")) if semantic else None
    counts = {"added": report.added, "updated": report.updated, "removed": report.removed}
    skipped = [{"path": i.path, "line": i.line, "reason": i.reason} for i in report.skipped]
    data = counts | {"skipped": skipped} | ({"embedded": embedded} if embedded is not None else {})
    if as_json:
        print_json(data)
    else:
        click.echo(
            f"indexed: {report.added} added, {report.updated} updated, {report.removed} removed, "
            f"{len(report.skipped)} skipped" + (f"; embedded {embedded}" if embedded is not None else "")
        )
    vault.issues = []  # the skipped files were just reported
    for issue in report.skipped:
        click.echo(f"  skipped {issue}", err=True)


@click.command(cls=MemfileCommand)
@json_option
def status(state: State, as_json: bool) -> None:
    """Show files on disk vs indexed, stale files, the watcher, hand edits and the git remote.

    Example: memfile status --json
    """
    data = state.vault().status()
    if as_json:
        print_json(data.to_dict())
        return
    click.echo(f"Mind: {data['mind']}")
    click.echo(
        f"Files: {data['on_disk']} on disk, {data['indexed']} indexed, {len(data['stale'])} stale "
        f"(the next command brings them in); last index update {data['last_index_update'] or 'never'}"
    )
    click.echo(f"Watcher: {'running, pid ' + str(data['watcher_pid']) if data['watcher_pid'] else 'not running'}")
    server = data["server"]
    if server and server.get("resident"):
        click.echo(
            f"Server: resident reader, pid {server['pid']}, since {server['since']}; ends after "
            f"{server['idle_left']} s without a read command (it answers them; stop it: memfile serve --stop)"
        )
    else:
        click.echo(
            f"Server: running, pid {server['pid']}, {server['address']} (it answers memfile's read commands)"
            if server
            else "Server: not running (each command reads the vault itself)"
        )
    click.echo(
        f"Uncommitted hand edits: {len(data['uncommitted'])}" + "".join(f"\n  {p}" for p in data["uncommitted"][:20])
    )
    unreadable = data.get("unreadable") or []
    if unreadable:
        click.echo(
            f"Unreadable (skipped; memfile never changes them): {len(unreadable)}"
            + "".join(f"\n  {u['path']}{':' + str(u['line']) if u['line'] else ''}: {u['reason']}" for u in unreadable)
        )
    if data["conflicts"]:
        click.echo(
            "Conflicts (memfile resolve REF --ours|--theirs|--edit):" + "".join(f"\n  {r}" for r in data["conflicts"])
        )
    git = data["git"]
    if git is None:
        click.echo("Git: no repository yet (the first write creates one)")
    elif git["upstream"] is None:
        click.echo(f"Git: no upstream branch (remotes: {', '.join(git['remotes']) or 'none'})")
    else:
        click.echo(f"Git: {git['upstream']}, {git['ahead']} ahead, {git['behind']} behind (as of the last fetch)")
    if data.get("semantic"):
        vectors = data["semantic"]
        click.echo(f"Semantic: {vectors['embedded']} of {vectors['total']} memories embedded ({vectors['model']})")


@click.command(name="last-recall", cls=MemfileCommand)
@json_option
def last_recall(state: State, as_json: bool) -> None:
    """What the last recall served (CLI or MCP): query, budget, tokens, each memory and why.

    Example: memfile last-recall
    """
    record = state.vault().last_recall()
    if as_json:
        print_json(record.to_dict())
        return
    click.echo(
        f"{record['served_at']}  {record['source']}  mind {record['mind']}"
        + (f"  query: {record['query']}" if record.get("query") else "")
    )
    click.echo(
        f"budget {record['budget'] or 'none'}, {record['tokens']} tokens, {len(record['memories'])} memories "
        f"({record['left_out']} left out, {record['shortened']} shortened)"
    )
    for item in record["memories"]:
        why = "pinned" if item["pinned"] else f"score {item['score']}" if item["score"] is not None else ""
        via = "linked from" if item.get("linked") else "next to"
        near = f", {via} {item['neighbour_of']}" if item.get("neighbour_of") else ""
        short = ", shortened" if item["shortened"] else ""
        click.echo(f"  {item['ref']}  {why}{near}{short}".rstrip())
