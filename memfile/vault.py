"""The Vault: the one facade over files, git, config and recall.

Every face (CLI, watcher, MCP server) calls these methods and nothing below
them. Reads go to the files every time (the files are the truth); writes
take the writer lock, write atomically and become one git commit each.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from . import fileformat
from .config import STATE_DIR, Config, caller_source, find_vault, load_config, select_mind
from .errors import FileParseError, InvalidInput
from .index.catalog import half_digest, joined
from .files import (
    Aside,
    Stat,
    folder_stat,
    is_folder_entry,
    lock_holder,
    may_fork,
    read_file,
    split_walk,
    stat_of,
    stat_walk,
)
from .index import CORRUPTION, Index, SearchOptions, SyncReport, cannot_write, search_memories
from .index.query import check_query
from .model import (
    Category,
    Memory,
    ParseIssue,
    Priority,
    SearchHit,
    Source,
    add_duration,
    parse_category,
    parse_duration,
    parse_priority,
    parse_source,
    parse_tags,
    resolve_ref,
    utc_now,
)
from .doctor import Doctor
from .history import History
from .paths import is_inside, shown_path
from .recalling import Recalling, recall_entry
from .sync import Sync
from .writes import Writes

if TYPE_CHECKING:
    from .recall import Recallable

T = TypeVar("T")


#: What `list --status` accepts.
STATUS_FILTERS = ("active", "superseded", "all")


class Vault(Writes, History, Sync, Doctor, Recalling):
    """A vault folder bound to one mind.

    Attributes:
        root: the vault folder.
        mind: the mind folder name this Vault reads and writes.
        actor: who is calling (`user` or `agent`); agents cannot verify.
        issues: files skipped by the last read, with file, line and reason.
        notices: things a write did that the caller should be told.
    """

    def __init__(self, root: Path, mind: str, config: Config, actor: Source) -> None:
        self.root = root
        self.mind = mind
        self.config = config
        self.actor = actor
        self.issues: list[ParseIssue] = []
        self.notices: list[str] = []
        self._watcher: Any = None
        self._cached: tuple[float | None, list[Memory]] | None = None  # (index version, catalog memories)
        self._recall_cache: tuple[tuple[float, bool], datetime, Recallable] | None = None  # see _recallable
        self._index: Index | None = Index(root / STATE_DIR / "index" / mind, config.lock_timeout, recall_entry)

    # --- opening ---------------------------------------------------------

    #: Set by memfile.watch (which sits above this module): starts a Watcher over a Vault.
    watcher_factory: Callable[..., Any] | None = None

    @classmethod
    def open(
        cls, path: str | os.PathLike[str] | None = None, mind: str | None = None, *,
        source: str | Source | None = None, watch: bool = False,
    ) -> Vault:
        """Open a vault and choose its mind.

        Args:
            path: the vault folder; default `MEMFILE_VAULT`, else the nearest parent holding memfile.toml.
            mind: the mind; default `MEMFILE_MIND`, else `default_mind`, else the only mind folder.
            source: who is calling, `user` or `agent`; default `MEMFILE_SOURCE`, else `user`.
            watch: keep the index in line with the files from a background thread
                until `close()` (or the end of a `with` block).

        Raises:
            NotAVault, NotFound, InvalidInput: the vault or mind cannot be chosen (the message says how to fix it).
        """
        root = find_vault(path)
        config = load_config(root)
        vault = cls(root, select_mind(root, config, mind), config, caller_source(source))
        if watch and cls.watcher_factory is not None:
            vault._watcher = cls.watcher_factory(vault)
        return vault

    @property
    def name(self) -> str:
        """The mind's display name (memfile.toml `[minds.NAME] name`), else its folder name."""
        return self.config.display_name(self.mind)

    @property
    def mind_dir(self) -> Path:
        return self.root / self.mind

    # --- reading ---------------------------------------------------------

    def memories(self) -> list[Memory]:
        """Every memory of the mind as it is on disk now (unreadable files go to `issues`): the index is
        brought in line with the files first (see `refresh`) and read, so not every file is parsed."""
        return self._read(self._memories)

    def _memories(self, report: SyncReport) -> list[Memory]:
        if self._index is None:
            return self._parse_all()
        pending = report.pending
        found = [m for m in self._catalog_memories() if m.path not in pending]
        found += [m for m in pending.values() if m is not None]
        self._take_issues(report)
        return found

    def _take_issues(self, report: SyncReport) -> None:
        """`issues`: the files the catalog could not parse, with what this read found (`pending` files read anew)."""
        assert self._index is not None
        issues = {i.path: i for i in self._index.catalog.issues() if i.path not in report.pending}
        issues.update((i.path, i) for i in report.skipped)
        self.issues = sorted(issues.values(), key=lambda i: i.path)

    def _memories_named(self, ref: str, place: str) -> list[Memory]:
        """The memories holding `category/key` on disk now: a store's lookup, without a stat of every file.

        Files added, removed or renamed anywhere in the mind are seen (their names are listed),
        and so is any change to `place` (the memory's own path) and to every file the catalog
        knows holds `ref`; not seen until the next read: an edit inside another file that
        turns it into `ref` (the next read, or doctor, then names the two files).
        """
        self._usable()
        if self._index is None or self._watcher_vouches():
            report = self.refresh()
        else:
            listed = stat_walk(self.mind_dir, self.root, stat=False)
            known = {m.path for m in self._index.catalog.memories_named(ref)} | {place}
            paths = sorted(known | (listed.keys() ^ self._index.catalog.recorded().keys()))
            report = self._sync(paths, wait=False)
        if self._index is None:
            return [m for m in self._parse_all() if m.ref == ref]
        pending = report.pending
        found = [m for m in self._index.catalog.memories_named(ref) if m.path not in pending]
        return found + [m for m in pending.values() if m is not None and m.ref == ref]

    def _catalog_memories(self) -> list[Memory]:
        """The catalog's memories, read again only when the index changed since this Vault last read them
        (a long-lived Vault, such as the MCP server's, then skips reading 10,000 rows per call)."""
        assert self._index is not None
        version = self._index.catalog.last_update()
        if self._cached is None or self._cached[0] != version or version is None:
            self._cached = (version, self._index.catalog.memories())
        return list(self._cached[1])

    def refresh(self, progress: Callable[[int, int], None] | None = None) -> SyncReport:
        """Bring the index in line with the mind's files: a stat-only diff, then re-read only what changed.

        Every read calls this first, so hand edits, `git pull`, checkouts and
        copied-in files are seen by the very next call. If another process is
        writing the index right now, nothing waits: what changed is read and
        overlaid (the report's `pending`). While a watcher runs and has nothing
        pending, it vouches for the index and the diff is skipped.

        Args:
            progress: called with (files read, files to read).

        Returns:
            A SyncReport: counts of added, updated and removed files, and the files skipped with reasons.
        """
        if progress is None and self._watcher_vouches():
            return SyncReport()
        return self._sync(None, wait=False, progress=progress)

    def _read(self, work: Callable[[SyncReport], T]) -> T:
        """`work(self.refresh())`, with the stat walk of the refresh beside the work when that can be.

        When the catalog recorded the digest of a walk that found nothing changed
        at its current version, `work` runs on the index as it is while two forked
        children walk one half of the files each (`Aside`; a one-shot command
        then costs about the longer of the work and half a walk, not their sum).
        The answer stands when the halves' digests join into that digest and the
        catalog is still at that version; anything else (an edit, a write by
        another process meanwhile, no fork here) gets `work` run after a real
        refresh, as before.
        """
        self._usable()
        vouched = None if self._index is None or self._watcher_vouches() else self._index.catalog.vouched()
        if vouched is None:
            return work(self.refresh())
        version, digest = vouched
        mind_dir, root = self.mind_dir, self.root
        walks = [Aside.start(lambda part=part: half_digest(stat_walk(mind_dir, root, part=part))) for part in (0, 1)]
        answer = None
        try:
            if None not in walks:
                answer = (work(SyncReport()),)
        finally:
            walked = [walk.result() for walk in walks if walk is not None]
        if (answer is not None and None not in walked and joined(version, *walked) == digest  # type: ignore[misc]
                and self._index is not None and self._index.catalog.vouched() == vouched):
            return answer[0]
        return work(self.refresh())

    def _usable(self) -> None:
        """Make sure the index can be opened and written, else read through a temporary one
        (`_without_index`): a vault on read-only media, a `.memfile` that is not a folder, a full disk."""
        if self._index is None or self._index.temporary:
            return
        try:
            self._index.catalog.open()
        except Exception as exc:
            if not cannot_write(exc):
                raise
            self._without_index(exc)

    def _without_index(self, exc: BaseException) -> None:
        """Leave the vault's index, which cannot be written (`exc` says why), for one made in a temporary
        folder for this Vault (built from the files, deleted with it); none when that cannot be made either
        (then reads parse every file, and search searches them in memory)."""
        assert self._index is not None
        folder = self._index.folder
        self._index.close()
        self.notices.append(f"the index in {folder} cannot be written ({_why(exc)}); reading the files "
                            "(through a temporary index)")
        try:
            self._index = Index.temporary(self.config.lock_timeout, recall_entry)
        except OSError:
            self._index = None

    def _watcher_vouches(self) -> bool:
        """True when a live watcher of this mind has applied every change it has seen.

        Then the stat-only diff is skipped: the watcher removes its marker the
        moment it hears of a change and writes it back once the batch is indexed.
        """
        state = self.root / STATE_DIR
        return (state / f"watch-{self.mind}.clean").exists() and lock_holder(state / f"watch-{self.mind}.lock") is not None

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> SyncReport:
        """Throw the index away and rebuild it from the files.

        Raises:
            LockTimeout: another process kept the index's writer lock past the timeout.
        """
        if self._index is not None:
            self._index.destroy()
        return self._sync(None, wait=True, progress=progress)

    def _sync(self, paths: list[str] | None, wait: bool, progress: Callable[[int, int], None] | None = None) -> SyncReport:
        if self._index is None:
            return SyncReport()
        apart = (0, 0, 0)  # added, updated, removed by a fresh process
        if paths is None:
            disk = split_walk(self.mind_dir, self.root)
        else:
            disk = {p: stat for p in paths if (stat := _stat(self.root, p)) is not None}
        looks, rebuilt = 0, False  # fresh looks taken; whether the index was destroyed to be built anew
        while True:
            try:
                if not (looks or rebuilt) and paths is None and not may_fork() and self._index.is_bulk(disk):
                    apart = _build_apart(self.root, self.mind, progress)  # the sync below then finds little to do
                report = self._index.sync(disk, self._load, paths, progress=progress, wait=wait,
                                          present=lambda path: _stat(self.root, path) is not None)
                report.added, report.updated, report.removed = map(sum, zip(apart, (report.added, report.updated, report.removed)))
                self._tell_damage()
                return report
            except CORRUPTION as exc:
                unwritable = cannot_write(exc)
                if not (unwritable or rebuilt) and _look_again(looks, exc):
                    looks += 1
                    self._index.close()  # a fresh look first: another process may have changed it under us
                    continue
                if unwritable and not self._index.temporary:
                    self._without_index(exc)  # then this sync again, in the temporary index
                    looks, rebuilt, apart = 0, False, (0, 0, 0)
                    if self._index is not None:
                        continue
                if rebuilt or unwritable:
                    if self._index is not None:
                        self.notices.append(f"the index in {self._index.folder} cannot be used ({exc}); reading the files")
                        self._index.close()
                    self._index = None
                    return SyncReport()
                self.notices.append(f"the index was damaged ({type(exc).__name__}) and is rebuilt from the files")
                self._index.destroy()
                rebuilt, apart = True, (0, 0, 0)  # the rebuild counts every file again

    def _tell_damage(self) -> None:
        """A notice when opening the index found it damaged and made it anew (once per finding)."""
        if self._index is not None and self._index.damage is not None:
            self.notices.append(f"the index was damaged ({self._index.damage}) and is rebuilt from the files")
            self._index.damage = None

    def _load(self, relpath: str) -> tuple[Stat, Memory]:
        """One file's stat and memory, read so that the stat belongs to the bytes parsed.

        Raises:
            FileParseError: the file cannot be read or parsed; for a folder the walk could not list
                (`<folder>/`), why it cannot be listed.
        """
        if is_folder_entry(relpath):
            raise FileParseError(relpath, None, f"folder cannot be read: {_unlistable_reason(self.root / relpath)}")
        path = os.path.join(self.root, relpath)  # from our own walk; read_file refuses symlinks leading out
        for _ in range(3):
            data, before, after = read_file(path, relpath, self._leads_inside)
            if before == after and len(data) == before[0]:
                break
        mtime = datetime.fromtimestamp(before[1] // 1_000_000_000, timezone.utc)
        return before, fileformat.parse(data, relpath, mtime)

    def _leads_inside(self, path: str) -> bool:
        return is_inside(Path(path), self.mind_dir)

    def _parse_all(self) -> list[Memory]:
        """Every memory, parsed from the files (when the index cannot be used); the rest go to `issues`."""
        self.issues = []
        found = []
        for relpath in sorted(stat_walk(self.mind_dir, self.root)):
            try:
                found.append(self._load(relpath)[1])
            except FileParseError as exc:
                self.issues.append(ParseIssue(exc.path, exc.line, exc.reason))
        return found

    def _find(self, ref: str) -> Memory:
        return resolve_ref(ref, self.memories(), self.mind)

    def get(self, ref: str) -> Memory:
        """One memory by REF.

        Args:
            ref: an id (`mem_...`), `category/key`, or a key unique in the mind.

        Returns:
            The memory as on disk now.

        Raises:
            InvalidInput: the REF is malformed or tries to leave the mind.
            NotFound: no memory matches.
            AmbiguousRef: the key is used in several categories.
        """
        return self._find(ref)

    show = get

    def list(
        self,
        category: str | Category | None = None,
        tags: str | list[str] | tuple[str, ...] | None = None,
        priority: str | Priority | None = None,
        source: str | Source | None = None,
        unverified: bool = False,
        include_expired: bool = False,
        status: str = "active",
    ) -> list[Memory]:
        """The mind's memories that pass every filter given, by category then key.

        Args:
            category, priority, source: keep only this value.
            tags: keep memories carrying all of these tags (case-insensitive).
            unverified: keep only unverified memories.
            include_expired: also keep memories whose `expires_at` has passed.
            status: `active` (default), `superseded`, or `all`.

        Raises:
            InvalidInput: a filter value is not allowed.
        """
        if status not in STATUS_FILTERS:
            raise InvalidInput("status", status, list(STATUS_FILTERS))
        want_superseded = {"active": False, "superseded": True}.get(status)
        want_category = parse_category(category) if category else None
        want_priority = parse_priority(priority) if priority else None
        want_source = parse_source(source) if source else None
        want_tags = set(parse_tags(tags))
        now = utc_now()
        return sorted(
            (
                m for m in self.memories()
                if (want_category is None or m.category is want_category)
                and (want_priority is None or m.priority is want_priority)
                and (want_source is None or m.source is want_source)
                and want_tags <= set(m.tags)
                and (not unverified or not m.verified)
                and (include_expired or not m.is_expired(now))
                and (want_superseded is None or m.superseded is want_superseded)
            ),
            key=lambda m: (str(m.category), m.key, m.path),
        )

    def expiring(self, within: str | timedelta = "7d") -> list[Memory]:
        """Memories that expire within the given time from now, soonest first.

        Args:
            within: a duration such as `30m`, `12h`, `7d`, `2w`.

        Raises:
            InvalidInput: `within` is not a duration.
        """
        now = utc_now()
        horizon = add_duration(now, parse_duration(within, "within"), "within")
        soon = [m for m in self.memories() if m.expires_at is not None and now < m.expires_at <= horizon]
        return sorted(soon, key=lambda m: (m.expires_at, m.ref))

    # --- search -------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        tags: str | list[str] | tuple[str, ...] | None = None,
        category: str | Category | None = None,
        priority: str | Priority | None = None,
        source: str | Source | None = None,
        unverified: bool = False,
        include_expired: bool = False,
        include_superseded: bool = False,
        limit: int = 10,
    ) -> list[SearchHit]:
        """Full-text search of the mind, best first (BM25F over content, key and tags).

        Use it to find what is known about a topic before answering or storing.
        Plain words are OR-grouped (more shared words rank higher; stop words and
        `?` are ignored); `"exact phrase"`, AND/OR/NOT, `prefix*`, `tag:docker`
        and `category:project` work too. Accents are ignored (`nha hang` finds
        `nhà hàng`), English words are stemmed, and Thai, Chinese and Japanese
        text is found by any substring of two or more characters.

        Args:
            query: what to look for (at most 4,096 characters).
            tags: only memories with all of these tags.
            category, priority, source: only this value.
            unverified: only unverified memories.
            include_expired: also memories whose `expires_at` has passed.
            include_superseded: also memories marked superseded by a newer one.
            limit: the most hits to return (1 to 1000).

        Returns:
            SearchHit values (memory, score, snippet with **matches**, rank). Where the vault's index
            cannot be written (read-only media, a full disk), the files are searched through a
            temporary index, or, when none can be made, in memory.

        Raises:
            InvalidInput: the query cannot be parsed or a filter is not allowed.
        """
        check_query(query)  # before any work: a 10 MB query is refused at once
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidInput("limit", limit, "a whole number from 1 to 1000")
        options = SearchOptions(
            tags=parse_tags(tags),
            category=str(parse_category(category)) if category else None,
            priority=str(parse_priority(priority)) if priority else None,
            source=str(parse_source(source)) if source else None,
            unverified=unverified, include_expired=include_expired, include_superseded=include_superseded, limit=limit,
        )

        def search(report: SyncReport) -> list[SearchHit]:
            if self._index is not None and self._index.check():  # opened here: the walk has started by now
                self._tell_damage()
                report = self.refresh()  # the new index knows no file yet
            index = self._index
            if index is None:  # not even a temporary index could be made: the files, searched in memory
                return search_memories(self._parse_all(), query, options, utc_now())
            self.issues = index.catalog.issues()
            return self._searching(lambda pending: index.search(query, options, utc_now(), pending), report)

        return self._read(search)

    def warm(self, seconds: float = 0.005, stop: Callable[[], bool] | None = None) -> bool:
        """Spend about `seconds` on work that makes the searches to come faster; True while there is more.

        For a process that stays open: the MCP server calls it while no request
        waits. It works out the scores of the index's most frequent words ahead of
        the searches that need them, and starts over after any change to the
        index. The work pauses about every 0.4 ms, and stops there when `stop()`
        is true (a request came in). It reads no file and changes nothing; a
        damaged index is left to the next search to rebuild.
        """
        if self._index is None:
            return False
        try:
            return self._index.warm(seconds, stop)
        except CORRUPTION:
            self._index.close()
            return False

    def _searching(self, search: Callable[[dict[str, Memory | None]], T], report: SyncReport) -> T:
        """Run `search(pending)` over the index; a failure gets fresh looks (`_look_again`: another process
        merged segments under this reader, and Whoosh opens a segment's columns lazily), then a rebuild."""
        assert self._index is not None
        looks = 0
        while True:
            try:
                return search(report.pending)
            except CORRUPTION as exc:
                self._index.close()
                if not _look_again(looks, exc):
                    self.notices.append(f"the index was damaged ({type(exc).__name__}) and is rebuilt from the files")
                    return search(self.reindex().pending)
                looks += 1

    def by_tag(self, tag: str, include_expired: bool = False) -> list[Memory]:
        """The memories carrying a tag (case-insensitive), newest first.

        Raises:
            InvalidInput: the tag is empty or not allowed.
        """
        wanted = parse_tags([tag])
        if len(wanted) != 1:
            raise InvalidInput("tag", tag, "one tag")
        memories = self.list(tags=wanted, include_expired=include_expired)
        return sorted(memories, key=lambda m: (m.updated_at, m.ref), reverse=True)

    def tags(self) -> list[tuple[str, int]]:
        """Every tag of the mind's unexpired memories with how many carry it, most used first."""
        counts = Counter(tag for memory in self.list() for tag in memory.tags)
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))

    def stats(self) -> dict[str, Any]:
        """Counts of the mind's memories (per category, priority, source; verified; expired; superseded) and index facts."""
        memories = self.memories()
        now = utc_now()
        folder = self.root / STATE_DIR / "index" / self.mind
        size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file()) if folder.is_dir() else 0
        return {
            "mind": self.mind,
            "name": self.name,
            "total": len(memories),
            "by_category": {str(c): sum(1 for m in memories if m.category is c) for c in Category},
            "by_priority": {str(p): sum(1 for m in memories if m.priority is p) for p in Priority},
            "by_source": {str(s): sum(1 for m in memories if m.source is s) for s in Source},
            "verified": sum(1 for m in memories if m.verified),
            "unverified": sum(1 for m in memories if not m.verified),
            "expired": sum(1 for m in memories if m.is_expired(now)),
            "superseded": sum(1 for m in memories if m.superseded),
            "unreadable_files": len(self.issues),
            "index_bytes": size,
            "last_index_update": self._last_index_update(),
        }

    def _last_index_update(self) -> str | None:
        last = self._index.catalog.last_update() if self._index is not None else None
        return datetime.fromtimestamp(last, timezone.utc).isoformat() if last else None

    def status(self) -> dict[str, Any]:
        """How the mind's files, index, watcher and git repository stand, without changing anything.

        Returns:
            on_disk and indexed file counts, stale paths (changed on disk since indexed: a file whose
            stat cannot prove it unchanged is read and compared), `unreadable`: the files (and folders,
            `<folder>/`) that cannot be read, as last read, each a dict of `path`, `line` (or None) and
            `reason`; last index update, the watcher's pid (or None), uncommitted hand edits,
            conflicted memories (as last indexed: a sync found their body changed on both sides),
            and the git upstream with ahead/behind counts (None without a repository).
        """
        self._usable()
        disk = stat_walk(self.mind_dir, self.root)
        if self._index is not None:
            recorded = self._index.catalog.recorded()
            stale = self._index.stale_paths(disk, self._load)
            issues = {i.path: i for i in self._index.catalog.issues()}
        else:
            recorded, stale = {}, sorted(disk)
            self._parse_all()
            issues = {i.path: i for i in self.issues}
        for path in disk:  # a folder that cannot be listed is named even before a read indexed it
            if is_folder_entry(path) and path not in issues:
                issues[path] = ParseIssue(path, None, f"folder cannot be read: {_unlistable_reason(self.root / path)}")
        return {
            "mind": self.mind,
            "on_disk": sum(1 for path in disk if not is_folder_entry(path)),
            "indexed": sum(1 for path in recorded if not is_folder_entry(path)),
            "stale": stale,
            "unreadable": [{"path": i.path, "line": i.line, "reason": i.reason}
                           for path, i in sorted(issues.items()) if path in disk],
            "last_index_update": self._last_index_update(),
            "watcher_pid": lock_holder(self.root / STATE_DIR / f"watch-{self.mind}.lock"),
            "uncommitted": [shown_path(p) for p in self._git.changed_paths(self.mind) if p.endswith(".md")]
            if self._git.exists() else [],
            "conflicts": sorted(m.ref for m in self._index.catalog.memories() if m.conflict is not None) if self._index else [],
            "git": self._git.remote_status(),
        }

    def close(self) -> None:
        """Stop the watcher, if any, and release the index's files (the Vault may not be used afterwards)."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if self._index is not None:
            self._index.close()

    def __enter__(self) -> Vault:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _why(exc: BaseException) -> str:
    return exc.strerror or str(exc) if isinstance(exc, OSError) else str(exc)


def _look_again(looks: int, exc: BaseException) -> bool:
    """Whether a read of the index that failed after `looks` fresh looks takes another before it calls the
    index damaged: the first always (another process may have changed it under us), a second when a file
    was gone again (a busy writer's commits merged segments away twice)."""
    return looks == 0 or looks == 1 and isinstance(exc, FileNotFoundError)


def _stat(root: Path, relpath: str) -> Stat | None:
    """The stat of a walk's path now, as the walk gives it (None: gone); for a folder the walk could not
    list (`<folder>/`), its `unlistable` stat while it still cannot be listed."""
    if is_folder_entry(relpath):
        return folder_stat(root / relpath)
    try:
        return stat_of(os.stat(os.path.join(root, relpath)))
    except OSError:
        return None


def _unlistable_reason(folder: Path) -> str:
    try:
        with os.scandir(folder):
            return "it could not be listed"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def _build_apart(root: Path, mind: str, progress: Callable[[int, int], None] | None = None) -> tuple[int, int, int]:
    """(added, updated, removed) by a fresh Python process bringing a mind's index in line, its progress relayed:
    a process running threads (MCP server, watcher) may not fork, and would load on one core. Best effort."""
    import subprocess
    import sys

    code = ("import sys\nfrom memfile import Vault\ntell = lambda d, t: (d % 100 == 0 or d == t) and print(d, t, file=sys.stderr)\n"
            "r = Vault.open(sys.argv[1], sys.argv[2]).refresh(tell)\nprint(r.added, r.updated, r.removed)")
    here = str(Path(__file__).resolve().parent.parent)  # this memfile, wherever it was imported from
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
    try:  # never the caller's standard streams: the MCP server speaks on them
        with subprocess.Popen([sys.executable, "-c", code, str(root), mind], env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
            for line in child.stderr or ():  # to its end first: the one line on stdout never fills a pipe
                if progress is not None and len(told := line.split()) == 2 and "".join(told).isdigit():
                    progress(int(told[0]), int(told[1]))
            done = (child.stdout.read() if child.stdout else "").split()
        added, updated, removed = map(int, done) if child.returncode == 0 else (0, 0, 0)
    except (OSError, ValueError):  # no interpreter to start, or it failed
        return 0, 0, 0
    return added, updated, removed
