"""The index: a cache of the files, for fast search and fast bulk reads.

Two stores under `.memfile/index/`, both versioned by `SCHEMA_VERSION` in
their names and both rebuilt from the files whenever missing, corrupt or
older:

- a Whoosh full-text index (BM25F over content, key and tags, weighted by
  repetition in one field; the analyzer is in persisted.py) holding each
  memory as one stored blob for search hits;
- a catalog (SQLite, catalog.py): for every file, the stat it had when it
  was read, the parsed memory, or the reason it could not be parsed.
  Bringing the index in line with the files is a stat-only diff against the
  catalog; `list`, `show` and `recall` read the catalog instead of parsing
  every file, and never load Whoosh.

Whoosh's writer lock (an flock, so a killed holder releases it) serializes
index writers; searches never take it.
"""

from __future__ import annotations

import gc
import json
import marshal
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import partial
from math import inf
from pathlib import Path
from typing import Any

from ..config import plain
from ..errors import FileParseError, LockTimeout
from ..files import may_fork
from ..model import Memory, ParseIssue, SearchHit, memory_from_row, memory_to_row
from ..text import head, normalize
from .catalog import Catalog, Row, Stat, diff, is_unsure, issue_row, memory_row, settled
from .damage import IndexDamaged, decoding, is_damage
from .query import parse_query, weighting

SCHEMA_VERSION = 18  # 18: `expires` a column only; 17: the catalog keeps no digest, masks or state_more; 16: a content indexed up to INDEXED_CHARS; 15: the catalog keeps no recall entries
INDEX_NAME = f"memories_v{SCHEMA_VERSION}"
CATALOG_NAME = f"catalog_v{SCHEMA_VERSION}.sqlite"
#: From this many files to (re)read, a sync is a bulk load: both cores, no garbage collection pauses.
BULK = 2000
#: At most this many files recorded as unsure are read again and confirmed without a write of the index.
CONFIRM_MAX = 200


#: How many times the key's and the tags' words are repeated after the content (their BM25F weights).
KEY_WEIGHT = 2
TAG_WEIGHT = 2
#: The characters of a memory's content that search indexes: a memory is found by the words of its first
#: 256 KiB (about 40,000 words). Whoosh writes ~60 µs per distinct word, so a 10 MB store of distinct
#: words held the one worker of a server, and every client with it, for a minute; now 3 s at most.
INDEXED_CHARS = 256 * 1024


def indexed_content(content: str) -> str:
    """The part of `content` search indexes (`INDEXED_CHARS`), cut at a space so that no word is cut in two."""
    return head(content, INDEXED_CHARS)


def _document(memory: Memory, row: bytes) -> dict[str, Any]:
    """The Whoosh document of a memory (`row`: its marshalled catalog row); `text` starts with the content.

    `expires` is a column only (`hidden_docs` reads it whole), infinite for a memory that never expires.
    """
    key = " ".join([memory.key.replace("_", " ")] * KEY_WEIGHT)
    tags = " ".join([" ".join(memory.tags)] * TAG_WEIGHT)
    document: dict[str, Any] = {
        "path": memory.path,
        "category": str(memory.category),
        "priority": str(memory.priority),
        "source": str(memory.source),
        "verified": str(memory.verified).lower(),
        "status": str(memory.status or "active"),
        "tags": ",".join(t.replace(",", " ") for t in memory.tags),
        "text": f"{normalize(indexed_content(memory.content))}\n{key}\n{tags}",
        "doc": row,
    }
    document["expires"] = memory.expires_at.timestamp() if memory.expires_at is not None else inf
    return document


#: memfile's lock around a write of the index and its catalog (Whoosh's writer takes its own inside it).
SYNC_LOCK = "sync.lock"

#: Looks at the index's files before a table of contents that vanished is called damage (another
#: process's commit replaces it: each look lists the files again).
OPEN_LOOKS = 3


@dataclass
class RefreshReport:
    """What bringing the index in line with the files did."""

    added: int = 0
    updated: int = 0
    removed: int = 0
    skipped: list[ParseIssue] = field(default_factory=list)
    pending: dict[str, Memory | None] = field(default_factory=dict)  # read but not written: the lock was busy

    @property
    def changed(self) -> int:
        return self.added + self.updated + self.removed


@dataclass(frozen=True)
class SearchOptions:
    """Filters of a search; all must hold."""

    tags: tuple[str, ...] = ()
    category: str | None = None
    priority: str | None = None
    source: str | None = None
    unverified: bool = False
    include_expired: bool = False
    include_superseded: bool = False
    include_proposed: bool = False  # captured memories waiting for review (`Status.PROPOSED`)
    limit: int = 10
    snippets: bool = True  # recall ranks many hits and shows none of their snippets


class Store:
    """The Whoosh index and the catalog of one mind, in `folder` (`.memfile/index/<mind>/`), or in memory
    (`in_memory`: for a vault whose own index cannot be written).

    Its errors are raw: the `Index` (memfile.index) around it tells damage from bugs and recovers.
    """

    def __init__(self, folder: Path, lock_timeout: float, in_memory: bool = False) -> None:
        self.folder = folder
        self.lock_timeout = lock_timeout
        self.in_memory = in_memory
        self._ix: Any = None
        self.catalog = Catalog(None if in_memory else folder / CATALOG_NAME)
        self._searcher: Any = None
        self._hidden: dict[tuple[bool, bool, bool], tuple[datetime, datetime, set[int]]] = {}  # for `_searcher`
        self._queries: dict[str, Any] = {}  # typed text -> parsed query
        self._lengths: dict[str, dict[str, Any]] = {}  # for `weighting`: segment id -> field -> lengths
        self._lock = threading.Lock()  # the searcher and what is kept for it, for a threaded caller
        self.damage: str | None = None  # what opening last found damaged (and made anew); the Vault tells it

    # --- opening, rebuilding ----------------------------------------------

    def _open(self) -> Any:
        if self._ix is None and self.in_memory:
            from whoosh.filedb.filestore import RamStorage

            from .persisted import schema

            self._ix = RamStorage().create_index(schema(), indexname=INDEX_NAME)
            self.catalog.forget_files()
        if self._ix is None:
            from whoosh import index

            from .persisted import schema

            self.folder.mkdir(parents=True, exist_ok=True)
            for look in range(OPEN_LOOKS):
                try:
                    if index.exists_in(str(self.folder), INDEX_NAME):
                        self._check_segments()
                        self._ix = index.open_dir(str(self.folder), indexname=INDEX_NAME)
                    break
                except Exception as exc:
                    if isinstance(exc, FileNotFoundError) and look < OPEN_LOOKS - 1:
                        # Whoosh lists the tables of contents, then opens the newest: another process's
                        # commit may have written a newer one and deleted that one in between.
                        continue
                    if not is_damage(exc):
                        raise
                    self._ix = None
                    self.damage = exc.kind if isinstance(exc, IndexDamaged) else type(exc).__name__
                    self.destroy()
                    self.folder.mkdir(parents=True, exist_ok=True)
                    break
            if self._ix is None:
                self._remove_other_versions()
                self._ix = index.create_in(str(self.folder), schema(), indexname=INDEX_NAME)
                self.catalog.forget_files()
        return self._ix

    def _check_segments(self) -> None:
        """Raise IndexDamaged when a segment file differs in size from when it was written: segment files never
        change once written (Whoosh itself may read a truncated segment as empty)."""
        recorded = self.catalog.meta("segments")
        with decoding("the sizes of the segments"):
            sizes = json.loads(recorded) if recorded else {}
        for path in _segment_files(self.folder):
            try:
                size = path.stat().st_size
            except FileNotFoundError:  # merged away by another process's commit just now: not damage
                continue
            if path.name in sizes and size != sizes[path.name]:
                raise IndexDamaged("ValueError", f"segment {path.name} was {sizes[path.name]} bytes and is now {size}")

    def _record_segments(self) -> dict[str, int]:
        return {path.name: path.stat().st_size for path in _segment_files(self.folder)}

    def wait_for_writer(self) -> None:
        """Wait (up to the timeout) until no other process writes the index; do not keep the lock.

        Raises:
            LockTimeout: another process held the index's writer lock past the timeout.
        """
        from whoosh.util.filelock import try_for

        storage = self._open().storage
        for name in (SYNC_LOCK, f"{INDEX_NAME}_WRITELOCK"):  # memfile's, then what `ix.writer()` takes
            lock = storage.lock(name)
            if not try_for(partial(lock.acquire, False), timeout=self.lock_timeout, delay=0.1):
                raise LockTimeout(str(self.folder / name), self.lock_timeout)
            lock.release()

    @property
    def opened(self) -> bool:  # the full-text index (a search opens it: `check`)
        return self._ix is not None

    def check(self) -> bool:
        """Open the full-text index, rebuilding it when damaged; True when it had to be made anew (one in
        memory always is)."""
        if self._ix is not None:
            return False
        existed = self.in_memory or any(self.folder.glob(f"_{INDEX_NAME}_*.toc"))
        self._open()
        return existed and not self.catalog.has_state()  # not recorded(): 100 ms to decode at 100,000 files

    def _remove_other_versions(self) -> None:
        """Delete the files of indexes with another schema version (they are rebuilt under the new name)."""
        current = (f"_{INDEX_NAME}_", f"{INDEX_NAME}_", CATALOG_NAME)
        for path in self.folder.iterdir():
            if path.name.startswith(("_memories_v", "memories_v", "catalog_v")) and not path.name.startswith(current):
                path.unlink(missing_ok=True)

    def destroy(self) -> None:
        """Delete the index and catalog (they are only a cache); the next use rebuilds them."""
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def close(self) -> None:
        with self._lock:
            if self._searcher is not None:
                self._searcher.close()
            self._ix = self._searcher = None
        if not self.in_memory:  # the memory catalog is the only copy
            self.catalog.close()

    # --- bringing the index in line -----------------------------------------

    def sync(
        self,
        disk: dict[str, Stat],
        load: Callable[[str], tuple[Stat, Memory]],
        paths: Iterable[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
        wait: bool = True,
        present: Callable[[str], bool] | None = None,
    ) -> RefreshReport:
        """Re-read what changed on disk since it was indexed, drop what is gone.

        Args:
            disk: path -> stat of the mind's files now (for `paths` only, when given).
            load: reads one file: its stat at reading time and the memory (raises FileParseError).
            paths: limit the diff to these paths (after a write); default all of the mind.
            progress: called with (done, total) while files are read.
            wait: wait for the writer lock (up to the timeout); if False and another
                process holds it, nothing is written and the report's `pending` holds
                what was read, for the caller to overlay (with BULK files or more to
                read, it first waits up to the timeout: the other process is likely
                building the index and done sooner than a second reading of it all).
            present: whether a path is on disk now (a file missing from `disk` may have come since).

        Raises:
            LockTimeout: `wait` is true and another writer held the lock past the timeout.
        """
        report = RefreshReport()
        todo = self._stale(disk, paths, load)
        if not todo:
            return report

        def busy(lock: str) -> RefreshReport:
            """Another process held `lock` past the timeout: raise LockTimeout when `wait`, else return what
            changed, read but not written (the report's `pending`)."""
            if wait:
                raise LockTimeout(str(self.folder / lock), self.lock_timeout)
            changed, removed = diff(self.catalog.recorded(), disk, paths)
            for path in changed:
                try:
                    report.pending[path] = load(path)[1]
                except FileParseError as exc:
                    report.pending[path] = None
                    report.skipped.append(ParseIssue(path, exc.line, exc.reason))
            report.pending.update(dict.fromkeys(removed))
            return report

        from whoosh.index import LockError
        from whoosh.util.filelock import try_for

        from ..files import forks_die_with_this_process

        ix = self._open()
        # memfile's own lock, kept until the catalog is written too: another writer reading the recorded
        # state in between would write it back without this batch (deleted files would stay for good).
        lock = ix.storage.lock(SYNC_LOCK)
        # Another process building the whole index is done sooner than this one reading every file again.
        timeout = self.lock_timeout if wait or todo >= BULK else 0.0
        if not try_for(partial(lock.acquire, False), timeout=timeout, delay=0.1):
            return busy(SYNC_LOCK)
        try:
            # The table of contents read before Whoosh's writer takes its lock: a writer whose opening
            # fails once it holds the lock (the index removed meanwhile, `rm -rf .memfile`) would keep it as
            # long as its error lives, and every later write of this process would wait for it in vain.
            empty = ix.is_empty()
            with forks_die_with_this_process():  # Whoosh's subwriters (procs), each with this process's locks
                try:
                    writer = ix.writer(timeout=timeout, delay=0.1, **_writer_options(todo, self.in_memory))
                except LockError:
                    return busy(f"{INDEX_NAME}_WRITELOCK")
                with _collector_paused(todo >= BULK):
                    return self._write_batch(ix, writer, empty, disk, load, paths, progress, report, present)
        finally:
            lock.release()

    def _write_batch(
        self,
        ix: Any,
        writer: Any,
        empty: bool,
        disk: dict[str, Stat],
        load: Callable[[str], tuple[Stat, Memory]],
        paths: Iterable[str] | None,
        progress: Callable[[int, int], None] | None,
        report: RefreshReport,
        present: Callable[[str], bool] | None = None,
    ) -> RefreshReport:
        """`sync`'s part under the writer lock: re-read, commit the full-text index, then the catalog."""
        try:
            read_at = time.time_ns()  # before any file is read: see catalog.settled
            recorded = self.catalog.recorded()  # again, under the lock
            changed, removed = diff(recorded, disk, paths)
            if present is not None:
                # `disk` was listed before the lock: a file another writer created and indexed since
                # is missing from it, but not gone. Read it again rather than drop it.
                back = [path for path in removed if present(path)]
                removed = [path for path in removed if path not in back]
                changed = sorted(set(changed) | set(back))
                disk = disk | {path: recorded[path] for path in back}
            known = {path for path in changed if path in recorded}
            rows: list[Row] = []
            add = writer.add_document if empty else writer.update_document  # nothing to replace
            for done, path in enumerate(changed, 1):
                try:
                    stat, memory = load(path)
                    row = marshal.dumps(memory_to_row(memory))
                    add(**_document(memory, row))
                    recorded[path] = settled(stat, read_at)
                    rows.append(memory_row(path, row, memory.ref))
                except FileParseError as exc:
                    writer.delete_by_term("path", path)
                    recorded[path] = settled(disk[path], read_at)
                    report.skipped.append(ParseIssue(path, exc.line, exc.reason))
                    rows.append(issue_row(path, exc.line, exc.reason))
                if progress:
                    progress(done, len(changed))
            for path in removed:
                writer.delete_by_term("path", path)
                recorded.pop(path, None)
            writer.commit(mergetype=_merge_policy)
        except BaseException:
            if not writer.is_closed:  # a failed commit closed it already: cancel would hide the reason
                writer.cancel()
            raise
        read = [row[0] for row in rows if row[3] is not None]
        report.added = sum(1 for path in read if path not in known)
        report.updated = len(read) - report.added
        report.removed = len(removed)
        self.catalog.write(rows, removed, recorded, {} if self.in_memory else self._record_segments())
        return report

    def _stale(
        self,
        disk: dict[str, Stat],
        paths: Iterable[str] | None,
        load: Callable[[str], tuple[Stat, Memory]] | None = None,
    ) -> int:
        """How many files to re-read or drop (all of them when there is no full-text index yet).

        With `load`, files recorded as unsure are read again first: when each still holds what the
        catalog has, their new stats are recorded (`Catalog.confirm`) and nothing is left to do.
        """
        if self._ix is None and not any(self.folder.glob(f"_{INDEX_NAME}_*.toc")):
            return max(len(disk), 1)  # a cheap look, so recall never loads Whoosh
        changed, removed = self.catalog.stale(disk, paths)
        if changed and not removed and load is not None and len(changed) <= CONFIRM_MAX:
            version, recorded = self.catalog.recorded_at()
            if all(is_unsure(recorded.get(path), disk[path]) for path in changed):
                read_at = time.time_ns()
                really, same = self._compare(changed, disk, load, recorded)
                if not really:
                    self.catalog.confirm(
                        version, {path: (recorded[path], settled(stat, read_at)) for path, stat in same.items()}
                    )
                    return 0
        return len(changed) + len(removed)

    def stale_paths(self, disk: dict[str, Stat], load: Callable[[str], tuple[Stat, Memory]]) -> list[str]:
        """The files of a whole walk that changed since they were indexed, new or gone; those recorded
        as unsure are read and compared with the catalog (nothing is written)."""
        recorded = self.catalog.recorded()
        changed, removed = diff(recorded, disk, None)
        unsure = [path for path in changed if is_unsure(recorded.get(path), disk[path])]
        really = self._compare(unsure, disk, load, recorded)[0] if unsure else []
        return sorted(set(changed) - set(unsure) | set(really) | set(removed))

    def _compare(
        self,
        paths: list[str],
        disk: dict[str, Stat],
        load: Callable[[str], tuple[Stat, Memory]],
        recorded: dict[str, Stat],
    ) -> tuple[list[str], dict[str, Stat]]:
        """(the `paths` whose file no longer holds what the catalog has, path -> stat of the others as read)."""
        stored = self.catalog.stored(paths)
        really: list[str] = []
        same: dict[str, Stat] = {}
        for path in paths:
            line, reason, blob = stored.get(path, (None, None, None))
            try:
                stat, memory = load(path)
            except FileParseError as exc:
                if blob is None and (line, reason) == (exc.line, exc.reason):
                    same[path] = disk[path]
                else:
                    really.append(path)
                continue
            with decoding(f"the catalog's memory of {path}"):
                held = marshal.loads(blob) if blob is not None else None
            if held is not None and held == memory_to_row(memory):
                same[path] = stat
            else:
                really.append(path)
        return really, same

    # --- search ---------------------------------------------------------------

    def search_counted(
        self,
        text: str,
        options: SearchOptions,
        now: datetime,
        pending: dict[str, Memory | None] | None = None,
        count: bool = False,
    ) -> tuple[list[SearchHit], int]:
        """BM25F search (hits, and with `count` how many memories match in all: not only the `limit` best;
        else 0); `pending` files (read, not yet indexed) are searched beside the index.

        Raises:
            InvalidInput: the query cannot be parsed.
        """
        from whoosh import query

        pending = pending or {}
        with self._lock:
            searcher = self._current()
            parsed = self._parsed(text)
            hidden = self._hidden_at(options, now)
            allow = _filter(options)
            if pending:  # read, not yet indexed: their indexed versions are out of date
                hidden = hidden | set(searcher.docs_for_query(query.Or([query.Term("path", p) for p in pending])))
            hits, matched = _live(searcher, parsed, allow, hidden, options, count)
        fresh = [m for m in pending.values() if m is not None and shown(m, options)]
        if fresh:
            more, more_matched = _search_memories(fresh, parsed, allow, options, now, count)
            hits += more
            matched += more_matched
        hits.sort(key=lambda h: -h.score)
        return [
            SearchHit(h.memory, h.score, h.snippet, rank) for rank, h in enumerate(hits[: options.limit], 1)
        ], matched

    def snippets(self, text: str, memories: list[Memory]) -> list[str]:
        """The snippet each of these memories has as a hit of a search for `text` (`search`'s, made for
        the hits a caller keeps of a search run with `snippets=False`).

        A memory read but not indexed yet (`pending`) may hold a word the index lacks: the query's own
        words are marked too, which changes nothing for an indexed memory (none holds such a word).

        Raises:
            InvalidInput: the query cannot be parsed.
        """
        with self._lock:
            searcher = self._current()
            parsed = self._parsed(text)
            words = _words(searcher, parsed)
        field = searcher.schema["text"]
        own = {
            term if isinstance(term, str) else field.from_bytes(term)
            for name, term in parsed.iter_all_terms(phrases=True)
            if name == "text"
        }
        return [_snippet(memory, words | own) for memory in memories]

    def warm(self) -> None:
        """Open a searcher of the index as it is now, with the default search's hidden documents worked
        out, so that the next search starts from both. Nothing when no search opened the index."""
        if self._ix is None:
            return
        with self._lock:
            self._current()
            self._hidden_at(SearchOptions(), datetime.now().astimezone())

    def _current(self) -> Any:
        """A searcher of the index as it is now (kept while the index does not change), under `_lock`."""
        ix = self._open()
        if self._searcher is not None and not self._searcher.up_to_date():
            self._searcher.close()  # whoosh3's `Searcher.refresh()` keeps segments merged away: a new one
            self._searcher = None
        if self._searcher is None:
            self._searcher = ix.searcher(weighting=weighting(self._lengths))
            self._hidden = {}
            segments = (reader.segment() for reader, _ in self._searcher.reader().leaf_readers())
            live = {segment.segment_id() for segment in segments if segment is not None}
            for gone in self._lengths.keys() - live:  # merged away
                del self._lengths[gone]
        return self._searcher

    def _parsed(self, text: str) -> Any:
        """`parse_query(text)`, kept for the next searches (parsing is a third of a short query's time)."""
        parsed = self._queries.get(text)
        if parsed is None:
            parsed = parse_query(text, self._searcher.schema)
            if len(self._queries) >= PARSED_QUERIES:
                self._queries.clear()
            self._queries[text] = parsed
        return parsed

    def _hidden_at(self, options: SearchOptions, now: datetime) -> set[int]:
        """`hidden_docs` of the current searcher, worked out once while it holds (the next expiry)."""
        key = (options.include_superseded, options.include_expired, options.include_proposed)
        kept = self._hidden.get(key)
        if kept is None or not kept[0] <= now < kept[1]:
            docs, until = hidden_docs(self._searcher, options, now)
            kept = self._hidden[key] = (now, until, docs)
        return kept[2]


@contextmanager
def _collector_paused(paused: bool) -> Iterator[None]:
    """No cyclic garbage collection while a big batch is indexed (`gc`): its many live objects make every
    collection walk them all again. Collected right after."""
    if not paused or not gc.isenabled() or plain("gc"):
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


#: Parsed queries a store keeps (`Store._parsed`).
PARSED_QUERIES = 256

#: Small segments a one-file change may leave before they are merged: merging on every commit
#: rewrites the small segments each time (about half of indexing one stored memory at 10,000).
LOOSE_SEGMENTS = 6


def shown(memory: Memory, options: SearchOptions) -> bool:
    """Whether a search with `options` may show the memory by its status (superseded, proposed)."""
    return (options.include_superseded or not memory.superseded) and (options.include_proposed or not memory.proposed)


def hidden_docs(searcher: Any, options: SearchOptions, now: datetime) -> tuple[set[int], datetime]:
    """The superseded, proposed and expired documents at `now` (unless `options` include them), and until
    when that holds: the next expiry within a day. The expiry dates come from the `expires` column."""
    from whoosh import query

    statuses = [
        s
        for s, shown in (("superseded", options.include_superseded), ("proposed", options.include_proposed))
        if not shown
    ]
    hidden = {doc for s in statuses for doc in searcher.docs_for_query(query.Term("status", s))}
    until = now + timedelta(days=1)
    reader = searcher.reader()
    if not options.include_expired and reader.has_column("expires"):  # an empty index has none
        moment, latest = now.timestamp(), until.timestamp()
        for docnum, expires in enumerate(reader.column_reader("expires")):
            if expires <= moment:
                hidden.add(docnum)
            elif expires <= latest:
                latest = expires
        until = datetime.fromtimestamp(latest, timezone.utc)
    return hidden, until


def stored_memory(searcher: Any, docnum: int) -> Memory:
    """The memory a Whoosh document stores (its `doc` blob)."""
    stored = searcher.stored_fields(docnum)["doc"]
    with decoding("a memory stored in the full-text index"):
        return memory_from_row(marshal.loads(stored))


def _merge_policy(writer: Any, segments: list[Any]) -> list[Any]:
    """Whoosh's MERGE_SMALL, but only once LOOSE_SEGMENTS small segments have piled up."""
    from whoosh.writing import MERGE_SMALL

    small = [s for s in segments if s.doc_count_all() < 1000]  # what MERGE_SMALL would merge (roughly)
    if len(small) < LOOSE_SEGMENTS:
        return segments
    return MERGE_SMALL(writer, segments)


def pool_mb() -> int:
    """The memory (MB) each Whoosh writer may hold postings in before it spills them to disk (see
    _writer_options): an eighth of the machine's memory, from 256 MB to 1 GB (256 where it is unknown),
    so that the two writers of a big load take at most a quarter of it."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20
    except (AttributeError, OSError, ValueError):
        return 256
    return max(256, min(1024, total // 8))


def _writer_options(count: int, in_memory: bool) -> dict[str, Any]:
    """Whoosh's documented writer options. Segments stay separate files, not one compound file: opening
    a compound segment copies it out of its mmap (whoosh3's BufferFile), ~0.4 s per search at 100,000
    memories. A writer holds its postings in memory up to `pool_mb()`: past that, Whoosh sorts them
    through files on disk. A big batch uses two writer processes (`procs`), but never from a threaded
    process (forking it is unsafe) nor for an index in memory."""
    options: dict[str, Any] = {"compound": False, "limitmb": pool_mb()}
    if count < BULK or in_memory or not may_fork() or plain("procs"):
        return options
    return options | {"procs": 2, "multisegment": True, "batchsize": 500}


def _segment_files(folder: Path) -> list[Path]:
    """The files of the index's segments (never changed once written), not its TOC or lock."""
    return [p for p in folder.glob(f"{INDEX_NAME}_*") if not p.name.endswith("_WRITELOCK")]


def _filter(options: SearchOptions) -> Any:
    """The filters asked for, or None: a filter costs a pass over the index, so none by default."""
    from whoosh import query

    terms: list[Any] = [query.Term("tags", t) for t in options.tags]
    for name, value in (("category", options.category), ("priority", options.priority), ("source", options.source)):
        if value is not None:
            terms.append(query.Term(name, value))
    if options.unverified:
        terms.append(query.Term("verified", "false"))
    return query.And(terms) if terms else None


def _live(
    searcher: Any, parsed: Any, allow: Any, hidden: set[int], options: SearchOptions, count: bool = False
) -> tuple[list[SearchHit], int]:
    """The best hits but the `hidden` documents, and with `count` how many match in all.

    Expired and superseded memories are masked, not the live ones filtered: Whoosh turns a filter into
    the set of every document it matches, and they are few. Only the hits returned get a snippet.
    """
    # block skipping only pays when the matches need not be counted
    results = searcher.search(parsed, filter=allow, mask=hidden or None, limit=options.limit, optimize=not count)
    words = _words(searcher, parsed) if options.snippets else frozenset()
    hits = []
    for score, docnum in results.top_n[: options.limit]:
        memory = stored_memory(searcher, docnum)
        hits.append(SearchHit(memory, float(score or 0.0), _snippet(memory, words) if options.snippets else "", 0))
    if not count:
        return hits, 0
    # Whoosh's own count leaves out matches that never made the top `limit` while it ran
    matched = set(searcher.docs_for_query(parsed)) - hidden
    return hits, len(matched & set(searcher.docs_for_query(allow)) if allow else matched)


def _words(searcher: Any, parsed: Any) -> frozenset[str]:
    """The index terms of the query's text field that are in the index (a `prefix*` expanded): what a
    snippet marks."""
    text = searcher.schema["text"]
    return frozenset(
        text.from_bytes(term) for _, term in parsed.existing_terms(searcher.reader(), fieldname="text", expand=True)
    )


def _snippet(memory: Memory, words: frozenset[str]) -> str:
    """A hit's snippet: the passages with the `words` in bold, else the content's start; on one line. Only
    the part search indexes is looked at (a 10 MB memory took 10 s to stem for a snippet)."""
    from .snippet import snippet as highlight

    content = indexed_content(memory.content)
    snippet = (words and highlight(normalize(content), words)) or _lead(content[:1024])
    return " ".join(snippet.split())


def _lead(content: str) -> str:
    flat = " ".join(content.split())
    return flat if len(flat) <= 160 else flat[:159].rstrip() + "…"


def _search_memories(
    memories: list[Memory], parsed: Any, allow: Any, options: SearchOptions, now: datetime, count: bool
) -> tuple[list[SearchHit], int]:
    """Search files that changed on disk but could not be indexed yet (the writer lock was busy)."""
    from whoosh.filedb.filestore import RamStorage

    from .persisted import schema

    ix = RamStorage().create_index(schema())
    writer = ix.writer()
    for memory in memories:
        writer.add_document(**_document(memory, marshal.dumps(memory_to_row(memory))))
    writer.commit()
    with ix.searcher(weighting=weighting()) as searcher:
        hidden = hidden_docs(searcher, options, now)[0]
        return _live(searcher, parsed, allow, hidden, options, count)
