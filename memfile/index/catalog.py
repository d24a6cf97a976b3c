"""The catalog: what the index knows of each file of a mind, in SQLite (standard library).

For every file: the parsed memory (a marshalled row), or the reason it could
not be parsed. In `meta`: the stat of every file when it was read (size,
mtime_ns, ctime_ns, inode; one compact blob, `state`), the sizes of the
full-text index's segment files and the version (`last_update`, changed by
every write).

Bringing the index in line with the files is a stat-only diff against
`state`. `list`, `show` and `recall` read memories here instead of parsing
every file, and never load Whoosh. A long-lived reader
catches up with this process's own writes by reading only the rows they wrote
(`Catalog.changes`), not every row.

A stat proves nothing about a file that changed just before it was read: a
later change within the same tick of the file system's clock (a second, on
file systems with 1-second timestamps) leaves every field as it was. So, as
git does with its racily clean entries, such a file's stat is recorded as
unsure (`settled`): the next look reads the file again, and records its stat
for good once the change is safely older than that read (`Catalog.confirm`
when the file still holds what the catalog has).
"""

from __future__ import annotations

import json
import marshal
import sqlite3
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from ..files import Stat
from ..model import Memory, ParseIssue, memory_from_row
from .damage import decoding

#: The size recorded for a file read too soon after its last change (see `settled`).
UNSURE = -1


def _tick_ns() -> int:
    """How often the clock that stamps files moves: Linux stamps them from its coarse clock, one tick
    (1 to 10 ms); 10 ms where that cannot be asked."""
    if sys.platform != "linux":
        return 10_000_000
    try:  # CLOCK_REALTIME_COARSE is 5 on Linux (Python names it from 3.13)
        return max(1_000_000, int(time.clock_getres(getattr(time, "CLOCK_REALTIME_COARSE", 5)) * 1e9))
    except (OSError, AttributeError, ValueError):
        return 10_000_000


#: How much older than the read that records it a file's last change must be before its stat is
#: trusted: two ticks of the kernel's clock and a little more where timestamps have sub-second digits
#: (changes within one tick share them); 2 s where they are whole seconds (1-second file systems; FAT
#: keeps even seconds).
FINE_NS = 2 * _tick_ns() + 1_000_000
COARSE_NS = 2_000_000_000
#: Seconds a catalog write waits for another one (they take milliseconds).
BUSY_TIMEOUT = 30
#: Files in a write from which SQLite's log is emptied right after it (`Catalog._empty_log`).
BIG_WRITE = 1000
#: The most recent writes of this process a reader may catch up with (`Catalog.changes`), and the most
#: files one may name: beyond that, reading every row costs about as much.
DELTAS, DELTA_FILES = 16, 500
#: Every memory of the catalog, in the order `Catalog.changes` keeps (the order of a scan: no sort).
ALL_MEMORIES = "SELECT memory FROM files WHERE memory IS NOT NULL ORDER BY rowid"
#: A file's row: path, the line and reason it could not be parsed, the marshalled memory, its REF, and
#: what a whole recall needs of it (see `memory_row`; None for a file that could not be parsed).
Row = tuple[Any, ...]


class Catalog:
    """The catalog file of one mind's index, reopened when another process replaced the file; in memory
    when `path` is None."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._inode: int | None = None
        self._recorded: tuple[Any, dict[str, Stat]] | None = None  # (version, state) as last read
        self._deltas: list[Delta] = []  # this process's latest writes, oldest first

    def _connection(self) -> sqlite3.Connection:
        if self.path is None:
            if self._db is None:
                self._db = _connect(":memory:")
            return self._db
        if self._db is not None and _inode(self.path) != self._inode:
            self.close()  # another process rebuilt the index folder: this connection writes a deleted file
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._db = _connect(self.path)
            except sqlite3.DatabaseError as exc:
                if "disk is full" in str(exc):
                    raise  # no damage: deleting the file would make room for what the disk refused
                self.path.unlink(missing_ok=True)
                self._db = _connect(self.path)
            self._inode = _inode(self.path)
        return self._db

    def open(self) -> None:
        """Open the catalog file, made when missing (raises what the file system or SQLite raises)."""
        self._connection()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
        self._db = self._recorded = None
        self._deltas = []

    def meta(self, name: str) -> Any:
        row = self._connection().execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return row[0] if row else None

    def _metas(self, *names: str) -> dict[str, Any]:
        """Several meta values read at once (one statement: one consistent state)."""
        marks = ", ".join("?" * len(names))
        return dict(self._connection().execute(f"SELECT name, value FROM meta WHERE name IN ({marks})", names))

    def last_update(self) -> float | None:
        value = self.meta("last_update")
        return float(value) if value else None

    # --- the recorded state -------------------------------------------------

    def recorded(self) -> dict[str, Stat]:
        """The stat of every file of the mind as it was when last indexed (a fresh copy).

        The blob is unmarshalled again only when the catalog changed since this object last read it.
        """
        return self.recorded_at()[1]

    def recorded_at(self) -> tuple[Any, dict[str, Stat]]:
        """(version, `recorded()`): the state with the catalog version it belongs to."""
        version = self.meta("last_update")
        if self._recorded is None or self._recorded[0] != version or version is None:
            rows = self._metas("last_update", "state")
            self._recorded = (rows.get("last_update"), _state(rows.get("state")))
        return self._recorded[0], dict(self._recorded[1])

    def confirm(self, version: Any, stats: dict[str, tuple[Stat, Stat]]) -> None:
        """Record new stats of files read again and found as the catalog holds them (`stats`: path ->
        (the stat recorded when they were read, the new one)), while `version` is still the catalog's and
        each path still has that stat. The version stays: no memory changed. Best effort, and never waits
        (a read's write).
        """
        with self._never_waiting() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                if _value(db, "last_update") != version or version is None:
                    return
                if self._recorded is not None and self._recorded[0] == version:  # as read at this version
                    state = dict(self._recorded[1])
                else:
                    state = _state(_value(db, "state"))
                state.update({path: stat for path, (seen, stat) in stats.items() if state.get(path) == seen})
                db.execute("INSERT OR REPLACE INTO meta VALUES ('state', ?)", (marshal.dumps(state),))
                db.commit()
                self._recorded = (version, state)
            finally:
                if db.in_transaction:
                    db.rollback()

    def stored(self, paths: Iterable[str]) -> dict[str, tuple[int | None, str | None, bytes | None]]:
        """path -> (issue line, issue reason, marshalled memory row) of these files, as the catalog holds them."""
        db = self._connection()
        return {
            path: (line, reason, blob)
            for path, line, reason, blob in (
                row
                for path in paths
                for row in db.execute(
                    "SELECT path, issue_line, issue_reason, memory FROM files WHERE path = ?", (path,)
                )
            )
        }

    def has_state(self) -> bool:
        """Whether a state is recorded at all (a new index has none), without reading it."""
        return self._connection().execute("SELECT 1 FROM meta WHERE name = 'state'").fetchone() is not None

    def stale(self, disk: dict[str, Stat], paths: Iterable[str] | None) -> tuple[list[str], list[str]]:
        """(changed or new, removed) paths of `disk` against the recorded state, within `paths` when given."""
        return diff(self.recorded(), disk, paths)

    @contextmanager
    def _never_waiting(self) -> Iterator[sqlite3.Connection]:
        """The connection, for statements skipped rather than waited for when the catalog is busy."""
        db = self._connection()
        db.execute("PRAGMA busy_timeout = 0")
        try:
            yield db
        except sqlite3.Error:
            pass  # busy, or a vault this process may only read
        finally:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT * 1000}")

    def _empty_log(self) -> None:
        """Move SQLite's write-ahead log into the catalog file and empty it, unless a reader is in
        the way (then the next big write tries again; never waits).

        The first connection of a process reads the whole log: after a bulk write (27 MB at
        10,000 memories) by a process that ended without closing its connection (a read-only
        command's quick exit), every later command spent 15 ms on it.
        """
        with self._never_waiting() as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def write(
        self,
        rows: list[Row],
        removed: list[str],
        recorded: dict[str, Stat],
        segments: dict[str, int],
    ) -> str:
        """Record a batch: its files' rows, the files gone, the new state; returns the new version.

        What the batch changed is remembered (`changes`), with the version it was written over.
        """
        with self._connection() as db:
            db.execute("BEGIN IMMEDIATE")  # the version read next is the one this batch is written over
            before = db.execute("SELECT value FROM meta WHERE name = 'last_update'").fetchone()
            db.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in removed])
            db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?)", rows)
            version = str(time.time())
            db.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [("state", marshal.dumps(recorded)), ("segments", json.dumps(segments)), ("last_update", version)],
            )
        self._recorded = (version, recorded)
        paths = [row[0] for row in rows] + removed
        if before is None or not before[0] or len(paths) > DELTA_FILES:
            self._deltas = []
        else:
            self._deltas = [*self._deltas[1 - DELTAS :], Delta(float(before[0]), float(version), frozenset(paths))]
        if len(rows) + len(removed) >= BIG_WRITE:
            self._empty_log()
        return version

    def forget_files(self) -> None:
        """A new full-text index knows no file yet: nothing is recorded."""
        self._deltas = []
        with self._connection() as db:
            db.execute("DELETE FROM files")
            db.execute("DELETE FROM meta WHERE name IN ('state', 'segments')")
            db.execute("INSERT OR REPLACE INTO meta VALUES ('last_update', ?)", (str(time.time()),))

    # --- memories -------------------------------------------------------------

    def memories(self) -> list[Memory]:
        """Every memory the catalog holds, by rowid: a row written again comes last (a scan's own order)."""
        return _memories(self._connection().execute(ALL_MEMORIES))

    def memories_at(self) -> tuple[float | None, list[Memory]]:
        """(version, `memories()`), read together: the memories are the ones of that version."""
        with self._snapshot() as db:
            version = _version(db)
            return version, _memories(db.execute(ALL_MEMORIES))

    def changes(self, since: float | None) -> tuple[float, list[Memory], set[str]] | None:
        """What changed since version `since`, when only this process's writes came since (see `write`):
        (the version now; the memories now at the paths they wrote, in the order of `memories()`; the
        paths they left without a memory). None when the catalog has no version, or another process
        changed it since (or more than `DELTAS` writes did): then only a read of every row tells.

        Every row these writes touched was written again, or deleted, after every other row: a list of
        the memories at `since` without the touched paths, followed by the memories returned, is in the
        order of `memories()` now.
        """
        if since is None:
            return None
        with self._snapshot() as db:
            version = _version(db)
            if version is None:
                return None
            if version == since:
                return version, [], set()
            paths = _touched(self._deltas, since, version)
            if paths is None:
                return None
            rows = db.execute(
                "SELECT path, memory FROM files WHERE path IN (SELECT value FROM json_each(?)) "
                "AND memory IS NOT NULL ORDER BY rowid",
                (json.dumps(sorted(paths)),),
            ).fetchall()
        return version, _memories((blob,) for _, blob in rows), paths - {path for path, _ in rows}

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """The connection inside one read transaction: every statement sees the same version."""
        db = self._connection()
        db.execute("BEGIN")
        try:
            yield db
        finally:
            db.rollback()  # it wrote nothing

    def memories_named(self, ref: str) -> list[Memory]:
        """The memories the catalog holds for `category/key` (more than one only when files were copied)."""
        rows = self._connection().execute("SELECT memory FROM files INDEXED BY files_refs WHERE ref = ?", (ref,))
        return _memories(rows)

    def issues(self) -> list[ParseIssue]:
        # Through the partial index of issues: ORDER BY path in SQL would walk every row (and its memory).
        rows = self._connection().execute(
            "SELECT path, issue_line, issue_reason FROM files INDEXED BY files_issues WHERE issue_reason IS NOT NULL"
        )
        return sorted((ParseIssue(path, line, reason) for path, line, reason in rows), key=lambda i: i.path)


class Delta(NamedTuple):
    """One write of this process: the version it was written over, the version it made, the paths it wrote."""

    before: float
    after: float
    paths: frozenset[str]


def _touched(deltas: list[Delta], since: float, version: float) -> set[str] | None:
    """The paths the writes from version `since` to `version` touched, when `deltas` holds every one of
    them (each written over the version the one before it made); else None."""
    start = next((i for i, delta in enumerate(deltas) if delta.before == since), None)
    if start is None:
        return None
    paths: set[str] = set()
    for i in range(start, len(deltas)):
        if i > start and deltas[i].before != deltas[i - 1].after:
            return None
        paths |= deltas[i].paths
        if deltas[i].after == version:
            return paths
    return None


def _value(db: sqlite3.Connection, name: str) -> Any:
    """A `meta` value on this connection (None when there is none)."""
    row = db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
    return row[0] if row else None


def _version(db: sqlite3.Connection) -> float | None:
    """The catalog's version (`Catalog.last_update`) on this connection."""
    value = _value(db, "last_update")
    return float(value) if value else None


def _state(blob: bytes | None) -> dict[str, Stat]:
    """The recorded state (see `recorded`) from its stored blob."""
    with decoding("the catalog's state"):
        state = marshal.loads(blob) if blob else {}
        if not isinstance(state, dict):
            raise TypeError(f"a state of {type(state).__name__}")
        return state


def _memories(rows: Iterable[tuple[Any, ...]]) -> list[Memory]:
    """The memories of catalog rows (their marshalled memory first)."""
    with decoding("a memory in the catalog"):
        return [memory_from_row(marshal.loads(row[0])) for row in rows]


def memory_row(path: str, blob: bytes, ref: str) -> Row:
    """The row of a parsed file: its memory (`blob`, marshalled) and its REF."""
    return (path, None, None, blob, ref)


def issue_row(path: str, line: int | None, reason: str) -> Row:
    """The row of a file that could not be parsed."""
    return (path, line, reason, None, None)


def settled(stat: Stat, read_at: int) -> Stat:
    """`stat` as the index records it for a file read at `read_at` (`time.time_ns()`, taken before the
    read): itself, or marked UNSURE while the file's last change is too recent for any later change to
    be sure to show in its stat. The mtime counts as well as the ctime: a file system may keep no ctime."""
    size, mtime, ctime, inode = stat
    window = COARSE_NS if mtime % 1_000_000_000 == 0 and ctime % 1_000_000_000 == 0 else FINE_NS
    return stat if max(mtime, ctime) + window <= read_at else (UNSURE, mtime, ctime, inode)


def is_unsure(recorded: Stat | None, disk: Stat) -> bool:
    """Whether `recorded` is an UNSURE stat that `disk` would have matched: only reading the file tells."""
    return recorded is not None and recorded[0] == UNSURE and recorded[1:] == disk[1:]


def diff(recorded: dict[str, Stat], disk: dict[str, Stat], paths: Iterable[str] | None) -> tuple[list[str], list[str]]:
    """(changed or new, removed) paths: `disk` against `recorded`, within `paths` when given."""
    if paths is None:
        if disk == recorded:
            return [], []
        scope: Iterable[str] = disk.keys() | recorded.keys()
    else:
        scope = set(paths)
    changed = sorted(p for p in scope if p in disk and recorded.get(p) != disk[p])
    removed = sorted(p for p in scope if p in recorded and p not in disk)
    return changed, removed


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


def _connect(path: Path | str) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT)
    try:
        _prepare(db)
    except BaseException:
        db.close()  # its files closed now, not when the garbage collector finds the connection
        raise
    return db


def _prepare(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS files "
        "(path TEXT PRIMARY KEY, issue_line INTEGER, issue_reason TEXT, memory TEXT, ref TEXT)"
    )
    db.execute("CREATE INDEX IF NOT EXISTS files_issues ON files (issue_reason) WHERE issue_reason IS NOT NULL")
    db.execute("CREATE INDEX IF NOT EXISTS files_refs ON files (ref) WHERE ref IS NOT NULL")
    db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value BLOB)")
    db.commit()
