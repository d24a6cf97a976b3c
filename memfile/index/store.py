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

import errno
import gc
import json
import marshal
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..config import plain
from ..errors import FileParseError, LockTimeout
from ..model import Memory, ParseIssue, SearchHit, memory_to_row
from ..text import head, normalize
from .catalog import Catalog, Row, Stat, diff, is_unsure, issue_row, memory_row, settled
from .damage import IndexDamaged, decoding, is_damage
from .query import weighting
from .score_cache import ScoreCache, hidden_docs, stored_memory

SCHEMA_VERSION = 16  # 16: a content indexed up to INDEXED_CHARS; 15: the catalog keeps no recall entries; 14: the pickled classes moved to memfile.index.persisted
INDEX_NAME = f"memories_v{SCHEMA_VERSION}"
CATALOG_NAME = f"catalog_v{SCHEMA_VERSION}.sqlite"
#: From this many files to (re)read, a sync is a bulk load: both cores, no garbage collection pauses.
BULK = 2000
#: At most this many files recorded as unsure are read again and confirmed without a write of the index.
CONFIRM_MAX = 200


def schema() -> Any:
    from .persisted import schema as whoosh_schema

    return whoosh_schema()


def highlight(text: str, words: frozenset[str]) -> str:
    from .snippet import snippet

    return snippet(text, words)


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

    A memory that never expires has no `expires` (the expiry queries, score_cache.hidden_docs, only ever
    look for dates): Whoosh indexes a number as 16 terms, a fifth of a memory's postings.
    """
    key = " ".join([memory.key.replace("_", " ")] * KEY_WEIGHT)
    tags = " ".join([" ".join(memory.tags)] * TAG_WEIGHT)
    document: dict[str, Any] = {
        "path": memory.path,
        "category": str(memory.category),
        "priority": str(memory.priority),
        "source": str(memory.source),
        "verified": str(memory.verified).lower(),
        "status": "superseded" if memory.superseded else "active",
        "tags": ",".join(t.replace(",", " ") for t in memory.tags),
        "text": f"{normalize(indexed_content(memory.content))}\n{key}\n{tags}",
        "doc": row,
    }
    if memory.expires_at is not None:
        document["expires"] = memory.expires_at.timestamp()
    return document


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
    limit: int = 10
    snippets: bool = True  # recall ranks many hits and shows none of their snippets


class Store:
    """The Whoosh index and the catalog of one mind, in `folder` (`.memfile/index/<mind>/`).

    Its errors are raw: the `Index` (memfile.index) around it tells damage from bugs and recovers.
    """

    def __init__(self, folder: Path, lock_timeout: float) -> None:
        self.folder = folder
        self.lock_timeout = lock_timeout
        self._ix: Any = None
        self.catalog = Catalog(folder / CATALOG_NAME)
        self._searcher: Any = None
        self._warm: ScoreCache | None = None
        self.damage: str | None = None  # what opening last found damaged (and made anew); the Vault tells it
        self.in_temporary_folder = False  # made by `temporary`, for one Vault

    @classmethod
    def temporary(cls, lock_timeout: float) -> Store:
        """An index in a new temporary folder, deleted when the index is (or at exit): for a vault whose
        own index cannot be written (read-only media, a full disk). It is built from the files on first use.

        Raises:
            OSError: not even a temporary folder could be made and written.
        """
        import shutil
        import tempfile
        import weakref

        folder = Path(tempfile.mkdtemp(prefix="memfile-index-"))
        index = cls(folder, lock_timeout)
        index.in_temporary_folder = True
        weakref.finalize(index, shutil.rmtree, folder, True)
        try:
            index.catalog.open()
        except sqlite3.Error as exc:
            index.close()
            raise OSError(errno.EIO, f"a temporary index cannot be made in {folder}: {exc}") from None
        return index

    # --- opening, rebuilding ----------------------------------------------

    def _open(self) -> Any:
        if self._ix is None:
            from whoosh import index

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
        """Raise IndexDamaged when a segment file differs in size from when it was written.

        Segment files never change once written, so a different size means a
        damaged index (Whoosh itself may read a truncated segment as empty).
        """
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

        lock = self._open().lock("WRITELOCK")  # what `ix.writer()` takes, without making a writer (~5 ms)
        if not try_for(lock.acquire, timeout=self.lock_timeout, delay=0.1):  # as Whoosh's writer waits
            raise LockTimeout(str(self.folder / f"{INDEX_NAME}_WRITELOCK"), self.lock_timeout)
        lock.release()

    def check(self) -> bool:
        """Open the full-text index, rebuilding it when damaged; True when it had to be made anew."""
        if self._ix is not None:
            return False
        existed = any(self.folder.glob(f"_{INDEX_NAME}_*.toc"))
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
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)

    def close(self) -> None:
        if self._searcher is not None:
            self._searcher.close()
        self.catalog.close()
        self._ix = self._searcher = self._warm = None

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

        Raises:
            LockTimeout: `wait` is true and another writer held the lock past the timeout.
        """
        report = RefreshReport()
        todo = self._stale(disk, paths, load)
        if not todo:
            return report
        from whoosh.util.filelock import try_for

        from ..files import forks_die_with_this_process
        from .write_codec import open_writer

        ix = self._open()
        # The lock Whoosh's writer takes, taken here (as it waits): a writer whose opening fails once it
        # holds the lock (its folder removed meanwhile, `rm -rf .memfile`) would keep it until the garbage
        # collector found the writer, and every later write of this process would wait for it in vain.
        lock = ix.lock("WRITELOCK")
        # Another process building the whole index is done sooner than this one reading every file again.
        patient = wait or todo >= BULK
        if not try_for(lock.acquire, timeout=self.lock_timeout if patient else 0.0, delay=0.1):
            if wait:
                raise LockTimeout(str(self.folder / f"{INDEX_NAME}_WRITELOCK"), self.lock_timeout)
            return self._read_pending(disk, load, paths, report)
        # The writer lock is kept until the catalog is written too: another writer reading the recorded
        # state in between would write it back without this batch (deleted files would stay for good).
        try:
            with forks_die_with_this_process():  # Whoosh's subwriters (procs), each with this process's locks
                writer = open_writer(ix, lock=False, **_bulk_options(todo))
                return self._write_batch(ix, writer, disk, load, paths, progress, todo, report, present)
        finally:
            lock.release()

    def _write_batch(
        self,
        ix: Any,
        writer: Any,
        disk: dict[str, Stat],
        load: Callable[[str], tuple[Stat, Memory]],
        paths: Iterable[str] | None,
        progress: Callable[[int, int], None] | None,
        todo: int,
        report: RefreshReport,
        present: Callable[[str], bool] | None = None,
    ) -> RefreshReport:
        """`sync`'s part under the writer lock: re-read, commit the full-text index, then the catalog."""
        with _collector_paused(todo >= BULK):
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
                add = writer.add_document if ix.is_empty() else writer.update_document  # nothing to replace
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
                if self._searcher is not None:  # it reads the generation before this commit
                    self._searcher.close()
                    self._searcher = None
            except BaseException:
                if not writer.is_closed:  # a failed commit closed it already: cancel would hide the reason
                    writer.cancel()
                raise
        read = [row[0] for row in rows if row[3] is not None]
        report.added = sum(1 for path in read if path not in known)
        report.updated = len(read) - report.added
        report.removed = len(removed)
        self.catalog.write(rows, removed, recorded, self._record_segments(), disk if paths is None else None)
        return report

    def is_bulk(self, disk: dict[str, Stat]) -> bool:
        """Whether bringing the index in line with `disk` (a whole walk) is a bulk load (BULK files or more)."""
        return self._stale(disk, None) >= BULK

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
                        version,
                        {path: (recorded[path], settled(stat, read_at)) for path, stat in same.items()},
                        disk if paths is None else None,
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

    def _read_pending(
        self,
        disk: dict[str, Stat],
        load: Callable[[str], tuple[Stat, Memory]],
        paths: Iterable[str] | None,
        report: RefreshReport,
    ) -> RefreshReport:
        changed, removed = diff(self.catalog.recorded(), disk, paths)
        for path in changed:
            try:
                report.pending[path] = load(path)[1]
            except FileParseError as exc:
                report.pending[path] = None
                report.skipped.append(ParseIssue(path, exc.line, exc.reason))
        report.pending.update(dict.fromkeys(removed))
        return report

    # --- search ---------------------------------------------------------------

    def search(
        self, text: str, options: SearchOptions, now: datetime, pending: dict[str, Memory | None] | None = None
    ) -> list[SearchHit]:
        """BM25F search; `pending` files (read, not yet indexed) are searched beside the index.

        Raises:
            InvalidInput: the query cannot be parsed.
        """
        return self._search(text, options, now, pending, count=False)[0]

    def search_counted(
        self,
        text: str,
        options: SearchOptions,
        now: datetime,
        pending: dict[str, Memory | None] | None = None,
        count: bool = True,
    ) -> tuple[list[SearchHit], int]:
        """`search`, and with `count` how many memories match in all (not only the `limit` best; else 0)."""
        return self._search(text, options, now, pending, count=count)

    def snippets(self, text: str, memories: list[Memory]) -> list[str]:
        """The snippet each of these memories has as a hit of a search for `text` (`search`'s, made for
        the hits a caller keeps of a search run with `snippets=False`).

        A memory read but not indexed yet (`pending`) may hold a word the index lacks: the query's own
        words are marked too, which changes nothing for an indexed memory (none holds such a word).

        Raises:
            InvalidInput: the query cannot be parsed.
        """
        self._current()
        assert self._warm is not None
        if plain("score_cache"):
            from .query import parse_query

            parsed = parse_query(text, self._searcher.schema)
        else:
            parsed = self._warm.parsed(text)
        field = self._searcher.schema["text"]
        own = {
            term if isinstance(term, str) else field.from_bytes(term)
            for name, term in parsed.iter_all_terms(phrases=True)
            if name == "text"
        }
        words = _words(self._searcher, parsed) | own
        return [_snippet(memory, words) for memory in memories]

    def warm(self, seconds: float, stop: Callable[[], bool] | None = None) -> bool:
        """Spend about `seconds` working out the scores of the index's most frequent words
        (`ScoreCache.warm_some`); True while there is more to do. Nothing when no search opened the index."""
        if self._ix is None:
            return False
        self._current()
        assert self._warm is not None
        return self._warm.warm_some(seconds, stop)

    def _current(self) -> None:
        """A searcher of the index as it is now, with its `ScoreCache` (both new after any change)."""
        ix = self._open()
        if self._searcher is not None and not self._searcher.up_to_date():
            self._searcher.close()
            self._searcher = None
        if self._searcher is None:
            self._searcher = ix.searcher(weighting=weighting())
            masks = None if plain("masks") else Masks(self.catalog, _generation(self._searcher))
            self._warm = ScoreCache(self._searcher, masks=masks)

    def _search(
        self, text: str, options: SearchOptions, now: datetime, pending: dict[str, Memory | None] | None, count: bool
    ) -> tuple[list[SearchHit], int]:
        from whoosh import query

        pending = pending or {}
        self._current()
        assert self._warm is not None
        warm = None if plain("score_cache") else self._warm
        if warm is None:  # the plain path: Whoosh parses, masks and scores every query afresh
            from .query import parse_query

            parsed = parse_query(text, self._searcher.schema)
            hidden = hidden_docs(self._searcher, options.include_superseded, options.include_expired, now)[0]
        else:
            parsed = warm.parsed(text)
            hidden = warm.hidden(options.include_superseded, options.include_expired, now)
        allow = _filter(options)
        if pending:  # read, not yet indexed: their indexed versions are out of date
            hidden = hidden | set(self._searcher.docs_for_query(query.Or([query.Term("path", p) for p in pending])))
        hits, matched = _live(self._searcher, parsed, allow, hidden, options, count, warm)
        fresh = [m for m in pending.values() if m is not None and (options.include_superseded or not m.superseded)]
        if fresh:
            more, more_matched = _search_memories(fresh, parsed, allow, options, now, count)
            hits += more
            matched += more_matched
        hits.sort(key=lambda h: -h.score)
        return [
            SearchHit(h.memory, h.score, h.snippet, rank) for rank, h in enumerate(hits[: options.limit], 1)
        ], matched


@contextmanager
def _collector_paused(paused: bool) -> Iterator[None]:
    """No cyclic garbage collection while a big batch is indexed: its many live objects make every
    collection walk them all again (about a tenth of a cold reindex). Collected right after."""
    if not paused or not gc.isenabled() or plain("gc"):
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


#: Small segments a one-file change may leave before they are merged: merging on every commit
#: rewrites the small segments each time (about half of indexing one stored memory at 10,000).
LOOSE_SEGMENTS = 6


def search_memories(memories: list[Memory], text: str, options: SearchOptions, now: datetime) -> list[SearchHit]:
    """`Index.search` over these memories alone, through a full-text index made in memory: when no index
    can be written at all.

    Raises:
        InvalidInput: the query cannot be parsed.
    """
    from .query import parse_query

    parsed = parse_query(text, schema())
    live = [m for m in memories if options.include_superseded or not m.superseded]
    hits = _search_memories(live, parsed, _filter(options), options, now, count=False)[0] if live else []
    hits.sort(key=lambda h: -h.score)
    return [SearchHit(h.memory, h.score, h.snippet, rank) for rank, h in enumerate(hits[: options.limit], 1)]


def _merge_policy(writer: Any, segments: list[Any]) -> list[Any]:
    """Whoosh's MERGE_SMALL, but only once LOOSE_SEGMENTS small segments have piled up."""
    from whoosh.writing import MERGE_SMALL

    small = [s for s in segments if s.doc_count_all() < 1000]  # what MERGE_SMALL would merge (roughly)
    if len(small) < LOOSE_SEGMENTS:
        return segments
    return MERGE_SMALL(writer, segments)


def pool_mb() -> int:
    """The memory (MB) each Whoosh writer may hold postings in before it spills them to disk (see
    _bulk_options): an eighth of the machine's memory, from 256 MB to 1 GB (256 where it is unknown),
    so that the two writers of a big load take at most a quarter of it."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20
    except (AttributeError, OSError, ValueError):
        return 256
    return max(256, min(1024, total // 8))


def _bulk_options(count: int) -> dict[str, Any]:
    """Writer options. Segments stay separate files, not one compound file: opening a compound
    segment copies it out of its mmap (whoosh3's BufferFile), ~0.4 s per search at 100,000
    memories. A big batch uses both cores, but never from a threaded process (forking it is unsafe).
    A writer holds its postings in
    memory up to `pool_mb()`: past that, Whoosh sorts them through files on disk, which doubled the time
    per memory of a 100,000-memory load (at 256 MB); a small write never comes near it.
    """
    from .fastpath import may_fork
    from .write_codec import WriteCodec

    options: dict[str, Any] = {"compound": False, "limitmb": pool_mb()}
    if not plain("codec"):  # writes Whoosh's files, faster (write_codec.WriteCodec)
        options["codec"] = WriteCodec()
    if count < BULK or not may_fork() or plain("procs"):
        return options
    return options | {"procs": 2, "multisegment": True, "batchsize": 500}


def _segment_files(folder: Path) -> list[Path]:
    """The files of the index's segments (never changed once written), not its TOC or lock."""
    return [p for p in folder.glob(f"{INDEX_NAME}_*") if not p.name.endswith("_WRITELOCK")]


@dataclass(frozen=True)
class Masks:
    """The masks (superseded and expired documents) the catalog keeps for one generation of the
    full-text index, as `ScoreCache.masks`: a one-shot search takes one instead of finding it again."""

    catalog: Catalog
    generation: str  # see _generation

    def get(self, key: tuple[bool, bool], now: datetime) -> tuple[datetime, datetime, set[int]] | None:
        found = self.catalog.mask(self.generation, key, now.timestamp())
        if found is None:
            return None
        since, until, docs = found
        return datetime.fromtimestamp(since, timezone.utc), datetime.fromtimestamp(until, timezone.utc), docs

    def put(self, key: tuple[bool, bool], since: datetime, until: datetime, docs: set[int]) -> None:
        self.catalog.remember_mask(self.generation, key, since.timestamp(), until.timestamp(), docs)


def _generation(searcher: Any) -> str:
    """What tells one state of the full-text index from any other: Whoosh's generation number, which
    starts again at 0 when the index is rebuilt (while a process still reading the old one may keep
    its mask in the new catalog), and its segments in order: random ids, and how many deletions."""
    segments = [reader.segment() for reader, _ in searcher.reader().leaf_readers()]
    return f"{searcher.reader().generation()}:" + ",".join(
        f"{segment.segment_id()}-{segment.deleted_count()}" for segment in segments if segment is not None
    )


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
    searcher: Any,
    parsed: Any,
    allow: Any,
    hidden: set[int],
    options: SearchOptions,
    count: bool = False,
    warm: ScoreCache | None = None,
) -> tuple[list[SearchHit], int]:
    """The best hits but the `hidden` documents, and with `count` how many match in all.

    Plain words are scored from `warm` (cached word scores) when given. Expired and
    superseded memories are masked, not the live ones filtered: Whoosh turns a filter
    into the set of every document it matches, and they are few. Only the hits
    returned get a snippet.
    """
    top = warm.top(parsed, allow, hidden, options.limit, count) if warm is not None else None
    if top is not None:
        return _hits(searcher, parsed, top[0], options, warm), top[1]
    # block skipping only pays when the matches need not be counted
    results = searcher.search(parsed, filter=allow, mask=hidden or None, limit=options.limit, optimize=not count)
    hits = _hits(searcher, parsed, results.top_n, options, warm)
    if not count:
        return hits, 0
    # Whoosh's own count leaves out matches that never made the top `limit` while it ran
    matched = set(searcher.docs_for_query(parsed)) - hidden
    return hits, len(matched & set(searcher.docs_for_query(allow)) if allow else matched)


def _hits(
    searcher: Any, parsed: Any, best: list[tuple[float, int]], options: SearchOptions, warm: ScoreCache | None
) -> list[SearchHit]:
    """The `best` (score, docnum) as hits, with snippets if asked; memories decoded through `warm` when given."""
    words = _words(searcher, parsed) if options.snippets else frozenset()
    hits = []
    for score, docnum in best[: options.limit]:
        memory = warm.memory(docnum) if warm is not None else stored_memory(searcher, docnum)
        hits.append(SearchHit(memory, float(score or 0.0), _snippet(memory, words) if options.snippets else "", 0))
    return hits


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

    ix = RamStorage().create_index(schema())
    writer = ix.writer()
    for memory in memories:
        writer.add_document(**_document(memory, marshal.dumps(memory_to_row(memory))))
    writer.commit()
    with ix.searcher(weighting=weighting()) as searcher:
        hidden = hidden_docs(searcher, options.include_superseded, options.include_expired, now)[0]
        return _live(searcher, parsed, allow, hidden, options, count)
