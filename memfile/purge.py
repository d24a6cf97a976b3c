"""Purge: a memory gone from every version of the vault's history, and the record that it was (the Vault's
`Purger`).

`forget` removes a memory's file and git keeps every version; `purge` removes the versions too, for the
times keeping them is wrong (a person's request to be forgotten, a secret that reached a file by a hand
edit). It rewrites every ref's history without them (`memfile.git.rewrite`), prunes what the old history
left in .git, and clears what memfile keeps beside it (the index rebuilt, the vectors and last-recall
records and queued results that name the memory). Only a person purges.

Every purge is recorded in `.memfile-purged` at the top of the vault, committed: one JSON object a line
(the memory's id, mind and REF, what went, when and by whom; never its text or a hash of it), merged as a
union when vaults sync. A sync refuses a remote that purged what this clone still holds until
`sync --accept-purge` rewrites this clone the same way, and refuses to fetch from a remote that still
holds what this clone purged (`.git/MEMFILE_PURGE_PUSH`, with the commit each remote branch was at) until
`purge --push` replaces its history (force-with-lease). A purge writes its plan to `.git/MEMFILE_PURGE`
before it changes anything; a purge killed midway is finished by the next write (`finish_interrupted`),
which runs its steps again: each does nothing when it is already done.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import STATE_DIR
from .errors import InvalidInput, NotFound, Refused
from .files import atomic_write, read_or_none
from .git import PURGE_JOURNAL as JOURNAL
from .model import Progress, Source, format_datetime, step, utc_now
from .recalling import LAST_RECALL

if TYPE_CHECKING:
    from .git import GitStore
    from .history import History
    from .index import Index
    from .writer import Writer

#: The record of every purge, committed at the top of the vault.
TOMBSTONE = ".memfile-purged"
#: Two machines' purges both end up in the record (git's union merge keeps the lines of both sides).
TOMBSTONE_RULE = f"/{TOMBSTONE} merge=union"
#: In .git/: the remote branches that still hold purged versions, with the commit each was at.
PENDING = "MEMFILE_PURGE_PUSH"
#: The shortest string `purge --text` removes (a shorter one would cut into every word that holds it).
TEXT_MIN = 4


@dataclass
class PurgeReport:
    """What a purge removes (with `dry_run`: would remove) and what is left to do."""

    ref: str
    id: str
    mind: str
    versions: int  # versions of the memory (with `text`: versions holding it) in the whole history
    commits: int  # commits rewritten (every commit from the first version on)
    refs: list[str]  # refs that move (refs/heads/main, refs/remotes/origin/main, tags)
    on_disk: bool  # the memory's file is there now (a purge removes it; `text` rewrites it)
    text: bool  # only a string was removed, every other byte kept
    dry_run: bool
    commit: str | None = None  # the commit that records the purge
    #: Remotes that still hold the purged versions: `purge --push` replaces their history.
    remotes: list[str] = field(default_factory=list)
    pushed: list[str] = field(default_factory=list)  # remote branches `push` replaced

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def read_tombstone(data: bytes | None) -> list[dict[str, str]]:
    """The entries of a `.memfile-purged` (lines that are not a JSON object are skipped)."""
    entries = []
    for line in (data or b"").decode("utf-8", "replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and isinstance(entry.get("mind"), str):
            entries.append(entry)
    return entries


def entry_key(entry: dict[str, str]) -> tuple[str, str, str]:
    """What makes two entries the same purge on two machines: the mind, the memory and what went."""
    return entry["mind"], entry["id"], entry.get("what", "memory")


def pending(git: GitStore) -> dict[str, dict[str, Any]]:
    """The remotes that still hold purged versions: name -> {branch: lease sha}."""
    data = read_or_none(git.root / ".git" / PENDING)
    try:
        found = json.loads(data) if data else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def set_pending(git: GitStore, remotes: dict[str, dict[str, Any]]) -> None:
    path = git.root / ".git" / PENDING
    if remotes:
        atomic_write(path, json.dumps(remotes, sort_keys=True).encode("utf-8"))
    else:
        path.unlink(missing_ok=True)


class Purger:
    """The purge of one mind's memories, over its writer (the lock and git), index and history."""

    def __init__(self, writer: Writer, index: Index, history: History) -> None:
        self._writer, self._index, self._history = writer, index, history

    def purge(
        self, ref: str, text: str | None = None, dry_run: bool = False, progress: Progress | None = None
    ) -> PurgeReport:
        writer = self._writer
        if writer.actor is Source.AGENT:
            raise Refused(
                "only a person can purge a memory: an agent forgets it (git keeps its history); "
                "ask the user to run memfile purge"
            )
        if text is not None and (not isinstance(text, str) or len(text.strip()) < TEXT_MIN):
            raise InvalidInput("text", text, f"the exact string to remove, at least {TEXT_MIN} characters")
        from .git import memory_versions as versions

        with writer.transaction():
            git = writer.git
            writer.commit_changed(None)  # this mind's hand edits are versions too
            memory = next((v.memory for v in self._history.history(ref) if v.memory is not None), None)
            if memory is None:
                raise NotFound(f"no version of {ref} in mind {writer.mind} can be read, so nothing names its id")
            found = versions(git, writer.mind, memory.id, text.encode("utf-8") if text else None)
            if not found.blobs:
                raise NotFound(
                    f"no version of {memory.ref} holds that text" if text else f"{memory.ref} has no history"
                )
            on_disk = (writer.root / memory.path).is_file()
            report = PurgeReport(
                memory.ref, memory.id, writer.mind, len(found.blobs), len(found.commits), list(found.refs),
                on_disk, text is not None, dry_run,
            )  # fmt: skip
            if dry_run:
                return report
            _check_committed(git)
            entry = {
                "id": memory.id,
                "mind": writer.mind,
                "ref": memory.ref,
                "what": "text" if text else "memory",
                "purged_at": format_datetime(utc_now()),
                "by": f"{writer.config.author_name} ({writer.actor})",
            }
            leases = {ref: git.resolve(ref) for ref in found.refs if ref.startswith("refs/remotes/")}
            plan = {"record": entry, "path": memory.path, "text": text, "entries": [entry], "leases": leases}
            report.commit = _run(writer, self._index, plan, progress)
            report.remotes = sorted(pending(git))
            return report

    def finish_interrupted(self) -> list[str]:
        """For a writer holding the lock: finish a purge a killed process left half done; the notices."""
        data = read_or_none(self._writer.root / ".git" / JOURNAL)
        if data is None:
            return []
        plan = json.loads(data)
        _complete(self._writer, self._index, plan)
        return [f"finished the purge of {', '.join(e['ref'] for e in plan['entries'])} that was interrupted"]


def purge_everywhere(writer: Writer, index: Index, entries: list[dict[str, str]]) -> None:
    """For a writer holding the lock (a sync accepting another clone's purges): rewrite every ref's history
    without the memories `entries` name, wherever a version of one is left."""
    from .git import memory_versions as versions

    if any(versions(writer.git, e["mind"], e["id"]).blobs for e in entries):
        writer.commit_changed(None)
        _check_committed(writer.git)
        _run(writer, index, {"record": None, "path": None, "text": None, "entries": entries, "leases": {}})


def _check_committed(git: GitStore) -> None:
    """Refuse what a purge would lose besides the memory: uncommitted changes (it resets the work tree)
    and stashes (it expires every reflog, and older stash entries live in one)."""
    if changed := git.uncommitted():
        raise Refused(
            "a purge rewrites the work tree, and these files have changes git has not recorded: "
            f"{', '.join(changed[:10])}; commit them or put them back, then try again"
        )
    if stashed := git.stashes():
        raise Refused(
            f"the vault's repository holds {stashed} stash entries (git stash list), which a purge would drop "
            "with the old history: apply them (git stash pop) or drop them (git stash drop), then try again"
        )


def _run(writer: Writer, index: Index, plan: dict[str, Any], progress: Progress | None = None) -> str | None:
    """Journal the plan (before anything changes), then carry it out."""
    # The owner's only: it may hold the string `purge --text` removes.
    atomic_write(writer.root / ".git" / JOURNAL, json.dumps(plan).encode("utf-8"), mode=0o600)
    return _complete(writer, index, plan, progress)


def _complete(writer: Writer, index: Index, plan: dict[str, Any], progress: Progress | None = None) -> str | None:
    """The steps of a purge, each doing nothing when already done: record it (and remove the memory's
    file) in one commit, rewrite every ref's history, prune the old objects, clear memfile's state, note
    the remotes that still hold what went. Returns the commit that records it."""
    from .git import ATTRIBUTES, expire_old_objects, holds_id, write_attributes
    from .git import memory_versions as versions
    from .git import rewrite_history as rewrite

    git, root, entry = writer.git, writer.root, plan["record"]
    text = plan["text"].encode("utf-8") if plan["text"] else None
    if entry is not None:
        record = git.root / TOMBSTONE
        before = read_or_none(record) or b""
        if entry_key(entry) not in {entry_key(e) for e in read_tombstone(before)}:
            line = json.dumps(entry, ensure_ascii=False).encode("utf-8")
            atomic_write(record, before + (b"" if not before or before.endswith(b"\n") else b"\n") + line + b"\n")
        write_attributes(root, TOMBSTONE_RULE)
        paths = [TOMBSTONE, ATTRIBUTES]
        file = root / plan["path"]
        if text is None and (data := read_or_none(file)) is not None and holds_id(data, entry["id"]):
            file.unlink()
            paths.append(plan["path"])
        what = "text from " if text else ""
        git.commit(paths, f"purge {what}{entry['ref']} ({Source.USER})\n\n{writer.trailers()}")
    strip: set[str] = set()
    text_in: set[str] = set()
    minds: dict[str, set[str]] = {}
    for e in plan["entries"]:
        found = versions(git, e["mind"], e["id"], text if e.get("what") == "text" else None)
        (text_in if e.get("what") == "text" else strip).update(found.blobs)
        minds.setdefault(e["mind"], set()).add(e["id"])
    rewriting = step(progress, "rewriting history")
    if rewriting is not None:
        rewriting(0, 1)
    if strip or text_in:
        rewrite(git, frozenset(strip), text, frozenset(text_in))
    expire_old_objects(git)
    if rewriting is not None:
        rewriting(1, 1)
    for mind, ids in minds.items():
        clear_state(root, ids, index_of(writer, index, mind), step(progress, "indexing"))
    remotes = pending(git)
    for ref, lease in plan["leases"].items():
        remote, _, branch = ref.removeprefix("refs/remotes/").partition("/")
        remotes.setdefault(remote, {}).setdefault(branch, lease)  # the oldest: what the remote still holds
    set_pending(git, remotes)
    (git.root / ".git" / JOURNAL).unlink()
    return git.head() if entry is not None else None  # the record's commit, as the rewrite left it


def clear_state(
    root: Path, memory_ids: set[str], index: Index, progress: Callable[[int, int], None] | None = None
) -> None:
    """What memfile keeps beside a mind's files, cleared of purged memories: the index rebuilt (a removed
    document stays in the index's files until then), the vectors no memory has now deleted and their file
    compacted, and the last-recall records and queued results that name one of them removed."""
    index.rebuild(progress)
    state = root / STATE_DIR
    if any(state.glob("vectors-*.sqlite")):
        from .semantic.cache import compact

        compact(root, index.mind, index.memories())
    for path in [*state.glob(LAST_RECALL.format(mind="*")), *(state / "queue" / index.mind).glob("*")]:
        data = read_or_none(path) or b""
        if any(memory_id.encode() in data for memory_id in memory_ids):
            path.unlink(missing_ok=True)


def index_of(writer: Writer, index: Index, mind: str) -> Index:
    """The index of `mind`: the writer's own, or one opened for another mind."""
    from .index import Index

    return index if index.mind == mind else Index(writer.root, mind, writer.config.lock_timeout, writer.notices.append)
