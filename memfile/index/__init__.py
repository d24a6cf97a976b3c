"""The index: the cache of a mind's files, for fast search and fast bulk reads.

The only place memfile imports whoosh and sqlite3, and this module is the only
one other modules import (`__all__`). The files are the truth; everything here
can be deleted and is rebuilt from them. `Index` is what the Vault sees: every
read is answered as fresh as the files (`refresh`: a stat-only diff, then only
what changed is read again), and the index repairs itself: damaged stored
bytes (`IndexDamaged`) are rebuilt from the files with a notice; an index that
cannot be written (read-only media, a full disk) is replaced by one in memory,
built from the files. A bug in memfile is never taken for damage: it goes on
to the caller, and the index stays as it is.

Modules: store.py (the Whoosh index and the catalog of one folder), catalog.py
(the SQLite half), persisted.py (what is pickled into an index), query.py
(typed text to a Whoosh query; BM25 parameters), snippet.py (a hit's
passages), damage.py (damage versus bugs), source.py (reading the files).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast

from ..config import STATE_DIR, plain
from ..errors import Conflict, FileParseError
from ..files import Stat
from ..model import Memory, ParseIssue, SearchHit, utc_now
from . import source
from .damage import IndexDamaged, IndexUnwritable, stored_bytes
from .query import MAX_QUERY_CHARS, check_query
from .source import Known, is_folder_entry, parse_as_read, stat_walk
from .store import (
    BULK,
    CATALOG_NAME,
    INDEX_NAME,
    SCHEMA_VERSION,
    RefreshReport,
    SearchOptions,
    Store,
)

__all__ = [
    "BULK",
    "CATALOG_NAME",
    "INDEX_NAME",
    "MAX_QUERY_CHARS",
    "SCHEMA_VERSION",
    "STOP_WORDS",
    "Index",
    "IndexDamaged",
    "IndexStatus",
    "Known",
    "RefreshReport",
    "SearchOptions",
    "View",
    "check_query",
    "parse_as_read",
    "stem",
]


def __getattr__(name: str) -> Any:
    """`STOP_WORDS` and `stem` (Porter's, as the index stems), loaded with Whoosh on first use only."""
    if name == "STOP_WORDS":
        return __import__("memfile.index.persisted", fromlist=["STOP_WORDS"]).STOP_WORDS
    if name == "stem":
        return __import__("whoosh.lang.porter", fromlist=["stem"]).stem
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


T = TypeVar("T")
#: A mind's files as a git commit held them: each its memory, or why it could not be parsed (`Index`).
Commit = Sequence[Memory | ParseIssue]


class Index:
    """The cache of one mind, always answering as fresh as the files, and repairing itself.

    `notify` is told what the caller should hear about (the index was damaged and
    rebuilt; it cannot be written and an index in memory is used instead). `issues`
    holds the files the last read could not parse, with line and reason.

    `commit`: the mind's files as a git commit held them, read from git (`Vault.recall(at=...)`):
    the index is then in memory and never changes, and nothing under the vault is read or written.
    """

    def __init__(
        self, root: Path, mind: str, lock_timeout: float, notify: Callable[[str], None], commit: Commit | None = None
    ) -> None:
        self.root = root
        self.mind = mind
        self.mind_dir = root / mind
        self.folder = root / STATE_DIR / "index" / mind
        self.lock_timeout = lock_timeout
        self.issues: list[ParseIssue] = []
        self._notify = notify
        self._store = Store(self.folder, lock_timeout, in_memory=commit is not None)
        self._commit = None if commit is None else {f.path: f for f in sorted(commit, key=lambda f: f.path)}
        self._cached: tuple[float | None, list[Memory]] | None = None  # (catalog version, its memories)
        self._derived: dict[Hashable, tuple[float, datetime, datetime, object]] = {}  # (version, made, until, value)

    @property
    def store(self) -> Store:
        """The Whoosh index and catalog now in use (in memory when the vault's own cannot be written)."""
        return self._store

    # --- freshness ---------------------------------------------------------------------

    def refresh(
        self,
        progress: Callable[[int, int], None] | None = None,
        *,
        paths: list[str] | None = None,
        wait: bool = False,
        trust_watcher: bool = False,
        known: Mapping[str, Known] | None = None,
    ) -> RefreshReport:
        """Bring the index in line with the files: a stat-only diff, then re-read only what changed.

        Args:
            progress: called with (files read, files to read).
            paths: only these vault-relative paths (after a write); default the whole mind.
            wait: wait for another process writing the index (up to the lock timeout); else what
                changed is read and overlaid (the report's `pending`).
            trust_watcher: skip the diff while a live watcher vouches for the index (and no
                `progress` is asked for).
            known: what the caller wrote and parsed, by path (`source.load`): not parsed again.

        Raises:
            LockTimeout: `wait` is true and another process kept the writer lock past the timeout.
        """
        if self._commit is not None:
            return self._at_commit(self._commit)
        if trust_watcher and progress is None and paths is None and source.watcher_vouches(self.root, self.mind):
            return RefreshReport()
        if paths is not None and len(paths) >= BULK:  # an import: the whole mind's diff, so a bulk load may apply
            paths = None
        if paths is None:
            disk = stat_walk(self.mind_dir, self.root)
        else:
            disk = {p: stat for p in paths if (stat := source.stat_now(self.root, p)) is not None}
        looks, rebuilt = 0, False  # fresh looks taken; whether the index was destroyed to be built anew
        while True:
            store = self._store
            try:
                with stored_bytes():
                    report = store.sync(
                        disk,
                        self.load if not known else lambda path: self.load(path, known.get(path)),
                        paths,
                        progress=progress,
                        wait=wait,
                        present=lambda path: source.stat_now(self.root, path) is not None,
                    )
                self._tell_damage()
                return report
            except IndexUnwritable as exc:
                if store.in_memory:
                    raise
                self._in_memory(f"cannot be written ({exc.why})")
            except IndexDamaged as exc:
                if not rebuilt and _look_again(looks, exc):
                    looks += 1
                    store.close()  # a fresh look first: another process may have changed it under us
                    continue
                if store.in_memory:
                    raise
                if rebuilt:
                    self._in_memory(f"cannot be used ({exc})")
                    continue
                self._notify(_damaged(exc))
                store.destroy()
                rebuilt = True

    def _at_commit(self, files: dict[str, Memory | ParseIssue]) -> RefreshReport:
        """`refresh` of an index of a commit: its memories are overlaid (no Whoosh) until a search opens the
        full-text index (made anew: `View.search` refreshes), and then indexed, once, as a first read of a
        checkout of that commit would."""
        if not self._store.opened:
            memories: dict[str, Memory | None] = {path: f for path, f in files.items() if isinstance(f, Memory)}
            return RefreshReport(skipped=[f for f in files.values() if isinstance(f, ParseIssue)], pending=memories)

        def load(path: str) -> tuple[Stat, Memory]:
            file = files[path]
            if isinstance(file, ParseIssue):
                raise FileParseError(path, file.line, file.reason)
            return (0, 0, 0, 0), file  # the stat says nothing: the files never change

        return self._store.sync(dict.fromkeys(files, (0, 0, 0, 0)), load)

    def rebuild(self, progress: Callable[[int, int], None] | None = None) -> RefreshReport:
        """Throw the index away and build it again from the files.

        Raises:
            LockTimeout: another process kept the index's writer lock past the timeout.
            Conflict: the index cannot be written where it is (read-only media, no permission, a full disk).
        """
        if not self._store.in_memory:
            try:
                with stored_bytes():
                    self._store.catalog.open()
            except IndexUnwritable as exc:
                raise Conflict(
                    f"the index in {self._store.folder} cannot be written ({exc.why}), so it was not rebuilt; "
                    "reads answer from the files meanwhile: make the vault writable (or free space), then reindex"
                ) from None
            self._store.destroy()
        self._cached = None
        return self.refresh(progress, wait=True)

    def wait_for_writer(self) -> None:
        """Wait (up to the lock timeout) until no other process writes the index; an index that cannot be
        written (a full disk) is left for one in memory (`_in_memory`): the write goes on, and meets
        the full disk itself when it writes a file.

        Raises:
            LockTimeout: another process held the index's writer lock past the timeout.
        """
        try:
            with stored_bytes():
                self._store.wait_for_writer()
        except IndexUnwritable as exc:
            self._in_memory(f"cannot be written ({exc.why})")

    def _tell_damage(self) -> None:
        """A notice when opening the index found it damaged and made it anew (once per finding)."""
        if self._store.damage is not None:
            self._notify(f"the index was damaged ({self._store.damage}) and is rebuilt from the files")
            self._store.damage = None

    def _usable(self) -> None:
        """Make sure the index can be opened and written, else use one in memory (`_in_memory`): a vault
        on read-only media, a `.memfile` that is not a folder, a full disk."""
        if self._store.in_memory:
            return
        try:
            with stored_bytes():
                self._store.catalog.open()
        except IndexUnwritable as exc:
            self._in_memory(f"cannot be written ({exc.why})")

    def _in_memory(self, why: str) -> None:
        """Leave the vault's index (`why` it cannot be used) for one in memory, built from the files."""
        self._store.close()
        self._notify(f"the index in {self._store.folder} {why}; reading the files (through an index in memory)")
        self._store = Store(self.folder, self.lock_timeout, in_memory=True)
        self._cached = None
        self._derived.clear()

    # --- reads ------------------------------------------------------------------------

    def read(self, work: Callable[[View], T]) -> T:
        """`work` on a view of the index as fresh as the files."""
        self._usable()
        try:
            return work(View(self, self.refresh(trust_watcher=True)))
        except IndexDamaged as exc:  # what the work read was damaged: once more, on an index made anew
            self._notify(_damaged(exc))
            return work(View(self, self.rebuild()))

    def memories(self) -> list[Memory]:
        """Every memory of the mind as on disk now (`issues`: the files that cannot be parsed)."""
        return self.read(View.memories)

    def named(self, ref: str, place: str) -> list[Memory]:
        """The memories holding `category/key` on disk now: a store's lookup, without a stat of every file.

        Files added, removed or renamed anywhere in the mind are seen (their names are listed),
        and so is any change to `place` (the memory's own path) and to every file the catalog
        knows holds `ref`; not seen until the next read: an edit inside another file that
        turns it into `ref` (the next read, or doctor, then names the two files).
        """
        self._usable()
        if source.watcher_vouches(self.root, self.mind):
            report = self.refresh(trust_watcher=True)
        else:
            listed = stat_walk(self.mind_dir, self.root, stat=False)
            with stored_bytes():
                catalog = self._store.catalog
                known = {m.path for m in catalog.memories_named(ref)} | {place}
                paths = sorted(known | (listed.keys() ^ catalog.recorded().keys()))
            report = self.refresh(paths=paths)
        pending = report.pending
        with stored_bytes():
            found = [m for m in self._store.catalog.memories_named(ref) if m.path not in pending]
        return found + [m for m in pending.values() if m is not None and m.ref == ref]

    def warm(self, seconds: float, stop: Callable[[], bool] | None = None) -> bool:
        """Open a searcher of the index as it is now, for the searches to come (`Store.warm`, well within
        `seconds`; `stop` is not needed); False: nothing more to do. A damaged index is left to the next
        search to rebuild."""
        try:
            with stored_bytes():
                self._store.warm()
        except (IndexDamaged, IndexUnwritable):
            self._store.close()
        return False

    def close(self) -> None:
        """Release the index's files (it opens them again when used)."""
        self._store.close()

    def load(self, relpath: str, known: Known | None = None) -> tuple[Stat, Memory]:
        """One file's stat and memory (`source.load`).

        Raises:
            FileParseError: the file cannot be read or parsed.
        """
        return source.load(self.root, self.mind_dir, relpath, known)

    def last_update(self) -> float | None:
        """When the index last changed (a timestamp), None when never."""
        return self._store.catalog.last_update()

    def size(self) -> int:
        """The bytes the mind's index takes on disk."""
        return sum(f.stat().st_size for f in self.folder.iterdir() if f.is_file()) if self.folder.is_dir() else 0

    def status(self) -> IndexStatus:
        """How the files and the index stand, without changing anything (files recorded as unsure are read
        and compared)."""
        self._usable()
        disk = stat_walk(self.mind_dir, self.root)
        store = self._store
        with stored_bytes():
            recorded = store.catalog.recorded()
            stale = store.stale_paths(disk, self.load)
            issues = {i.path: i for i in store.catalog.issues()}
            conflicts = sorted(m.ref for m in store.catalog.memories() if m.conflict is not None)
        for path in disk:  # a folder that cannot be listed is named even before a read indexed it
            if is_folder_entry(path) and path not in issues:
                issues[path] = ParseIssue(
                    path, None, f"folder cannot be read: {source.unlistable_reason(self.root / path)}"
                )
        return IndexStatus(
            on_disk=sum(1 for path in disk if not is_folder_entry(path)),
            indexed=sum(1 for path in recorded if not is_folder_entry(path)),
            stale=stale,
            unreadable=[issue for path, issue in sorted(issues.items()) if path in disk],
            conflicts=conflicts,
        )


@dataclass
class IndexStatus:
    """How the files and the index stand (`Index.status`)."""

    on_disk: int
    indexed: int
    stale: list[str]
    unreadable: list[ParseIssue]
    conflicts: list[str]


class View:
    """The index for one read, as fresh as the files: what was read but could not be indexed yet
    (another process held the writer lock) is overlaid (`report.pending`)."""

    def __init__(self, index: Index, report: RefreshReport) -> None:
        self.index = index
        self.report = report

    @property
    def version(self) -> float | None:
        """The catalog's version this view reads (None: files are overlaid, or no index is in use)."""
        return self.index.last_update() if not self.report.pending else None

    def memories(self) -> list[Memory]:
        """Every memory of the mind (`index.issues`: the files that cannot be parsed)."""
        pending = self.report.pending
        found = [m for m in self._catalog_memories() if m.path not in pending]
        found += [m for m in pending.values() if m is not None]
        self.take_issues()
        return found

    def take_issues(self) -> None:
        """`index.issues`: the files the catalog could not parse, with what this read found."""
        index, pending = self.index, self.report.pending
        with stored_bytes():
            issues = {i.path: i for i in index._store.catalog.issues() if i.path not in pending}
        issues.update((i.path, i) for i in self.report.skipped)
        index.issues = sorted(issues.values(), key=lambda i: i.path)

    def _catalog_memories(self) -> list[Memory]:
        """The catalog's memories, read again only when the index changed since this Index last read them
        (a long-lived Vault, such as the MCP server's, then skips reading 10,000 rows per call); after
        writes of this process only, only the rows they wrote are read (`Catalog.changes`)."""
        index = self.index
        catalog, cached = index._store.catalog, index._cached
        with stored_bytes():
            found = catalog.changes(cached[0]) if cached is not None and not plain("catalog_cache") else None
            if cached is None or found is None:
                cached = index._cached = catalog.memories_at()
            elif found[0] != cached[0]:
                version, changed, gone = found
                touched = gone.union(m.path for m in changed)
                cached = index._cached = (version, [m for m in cached[1] if m.path not in touched] + changed)
        return list(cached[1])

    def derived(
        self,
        name: Hashable,
        now: datetime,
        make: Callable[[list[Memory]], tuple[T, datetime]],
        update: Callable[[T, datetime, list[Memory], set[str]], tuple[T, datetime]] | None = None,
    ) -> T:
        """`make(memories)`'s value (made with the moment until which it holds), kept while the catalog
        stays at this version and that moment has not come (nor the clock gone back before it was made):
        a long-lived Vault then skips a pass over the mind per call (recall's sorted set of recallable
        memories). `name` tells values apart.

        `update(value, until, changed, removed)` brings a kept value to the catalog's version when only
        this process wrote since it was kept (`Catalog.changes`): `changed` are the memories now at the
        paths written, `removed` the paths now without one; it returns what `make` would at `now` (and
        a moment until which that holds, no later than `make`'s).
        """
        index, version = self.index, self.version
        kept = index._derived.get(name)
        if version is not None and kept and kept[1] <= now < kept[2] and not plain("catalog_cache"):
            if kept[0] == version:
                self.take_issues()  # as `memories()` would: the files that cannot be parsed, for this read
                return cast(T, kept[3])
            if update is not None:
                with stored_bytes():
                    found = index._store.catalog.changes(kept[0])
                if found is not None:
                    value, until = update(cast(T, kept[3]), kept[2], found[1], found[2])
                    index._derived[name] = (found[0], now, until, value)
                    self.take_issues()
                    return value
        value, until = make(self.memories())
        if version is not None:
            index._derived[name] = (version, now, until, value)
        return value

    def search(
        self, text: str, options: SearchOptions, now: datetime | None = None, count: bool = False
    ) -> tuple[list[SearchHit], int]:
        """BM25F search (hits, and with `count` how many match in all). A failure gets fresh looks
        (another process merged segments under this reader, and Whoosh opens a segment's columns
        lazily), then a rebuild.

        Raises:
            InvalidInput: the query cannot be parsed.
        """
        index = self.index
        now = now or utc_now()
        with stored_bytes():
            made_anew = index._store.check()  # opened here: the walk has started by now
        if made_anew:
            index._tell_damage()
            self.report = index.refresh(trust_watcher=True)  # the new index knows no file yet
        with stored_bytes():
            index.issues = index._store.catalog.issues()
        looks = 0
        while True:
            try:
                with stored_bytes():
                    return index._store.search_counted(text, options, now, self.report.pending, count)
            except IndexDamaged as exc:
                index._store.close()
                if not _look_again(looks, exc):
                    damage = exc
                    break
                looks += 1
        index._notify(_damaged(damage))
        self.report = index.rebuild()
        with stored_bytes():
            return index._store.search_counted(text, options, now, self.report.pending, count)

    def snippets(self, text: str, memories: list[Memory]) -> list[str]:
        """The snippet each memory has as a hit of `search(text, ...)`: for the hits a caller keeps of
        a search run with `snippets=False` (a hybrid search fuses 50 and shows 10).

        Raises:
            InvalidInput: the query cannot be parsed.
        """
        if not memories:
            return []
        with stored_bytes():
            return self.index._store.snippets(text, memories)


def _damaged(exc: IndexDamaged | IndexUnwritable) -> str:
    return f"the index was damaged ({getattr(exc, 'kind', exc)}) and is rebuilt from the files"


def _look_again(looks: int, exc: BaseException) -> bool:
    """Whether a use of the index that failed after `looks` fresh looks takes another before it calls the
    index damaged: the first always (another process may have changed it under us), a second when a file
    was gone again (a busy writer's commits merged segments away twice)."""
    return looks == 0 or looks == 1 and isinstance(exc.__cause__, FileNotFoundError)
