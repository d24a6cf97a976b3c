"""The catalog: what the index knows of each file of a mind, in SQLite (standard library).

For every file: the parsed memory (a marshalled row), or the reason it could
not be parsed. In `meta`: the stat of every file when it was read (size,
mtime_ns, ctime_ns, inode; one compact blob, `state`, with the stats changed
since it was written in a small second one, `state_more`, so that a write of a
few files does not write every stat again), the sizes of the full-text
index's segment files, the version (`last_update`, changed by every write)
and the digest of the last whole walk found unchanged (`fingerprint`).

Bringing the index in line with the files is a stat-only diff against
`state`; when a whole walk has the digest recorded for the current version,
not even that: nothing changed. `list`, `show` and `recall` read memories
here instead of parsing every file, and never load Whoosh. A long-lived reader
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
from array import array
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from hashlib import blake2b
from pathlib import Path
from typing import Any, NamedTuple

from ..config import plain
from ..files import Stat
from ..model import Memory, ParseIssue
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
#: The most stats kept in `state_more` (see the module docstring) before they are folded into `state`.
STATE_MORE = 512
#: Every memory of the catalog, in the order `Catalog.changes` keeps (the order of a scan: no sort).
ALL_MEMORIES = "SELECT memory FROM files WHERE memory IS NOT NULL ORDER BY rowid"
#: A file's row: path, the line and reason it could not be parsed, the marshalled memory, its REF, and
#: what a whole recall needs of it (see `memory_row`; None for a file that could not be parsed).
Row = tuple[Any, ...]


class Catalog:
    """The catalog file of one mind's index; reopened when another process replaced the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._inode: int | None = None
        self._recorded: tuple[Any, dict[str, Stat]] | None = None  # (version, state) as last read
        self._deltas: list[Delta] = []  # this process's latest writes, oldest first

    def _connection(self) -> sqlite3.Connection:
        if self._db is not None and _inode(self.path) != self._inode:
            self.close()  # another process rebuilt the index folder: this connection writes a deleted file
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._db = _connect(self.path)
            except sqlite3.DatabaseError:
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

    def file_count(self) -> int:
        """How many files the catalog records (what a walk of the mind will stat, about)."""
        return int(self._connection().execute("SELECT COUNT(*) FROM files").fetchone()[0])

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
            rows = self._metas("last_update", "state", "state_more")
            self._recorded = (rows.get("last_update"), _state(rows.get("state"), rows.get("state_more")))
        return self._recorded[0], dict(self._recorded[1])

    def confirm(self, version: Any, stats: dict[str, tuple[Stat, Stat]], walk: dict[str, Stat] | None) -> None:
        """Record new stats of files read again and found as the catalog holds them (`stats`: path ->
        (the stat recorded when they were read, the new one)), while `version` is still the catalog's and
        each path still has that stat; with `walk` (a whole walk), its digest too when the state is now
        exactly that walk. The version stays: no memory changed. Best effort, and never waits (a read's write).
        """
        db = self._connection()
        db.execute("PRAGMA busy_timeout = 0")
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                rows = dict(db.execute("SELECT name, value FROM meta WHERE name IN ('last_update', 'state_more')"))
                if rows.get("last_update") != version or version is None:
                    return
                if self._recorded is not None and self._recorded[0] == version:  # as read at this version
                    state = dict(self._recorded[1])
                else:
                    blob = db.execute("SELECT value FROM meta WHERE name = 'state'").fetchone()
                    state = _state(blob[0] if blob else None, rows.get("state_more"))
                confirmed = {path: stat for path, (seen, stat) in stats.items() if state.get(path) == seen}
                state.update(confirmed)
                _write_state(db, state, rows.get("state_more"), confirmed)
                if walk is not None and state == walk:
                    db.execute("INSERT OR REPLACE INTO meta VALUES ('fingerprint', ?)", (fingerprint(version, walk),))
                db.commit()
                self._recorded = (version, state)
            finally:
                if db.in_transaction:
                    db.rollback()
        except sqlite3.Error:
            pass  # busy, or a vault this process may only read: the next read confirms them
        finally:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT * 1000}")

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
        """(changed or new, removed) paths of `disk` against the recorded state, within `paths` when given.

        A whole walk (`paths` None) is first checked against the digest of the
        last one found unchanged; when the full diff finds nothing changed, its
        digest is recorded for the next check.
        """
        if paths is None and not plain("digest"):
            vouched = self.vouched()
            if vouched is not None and vouched[1] == fingerprint(vouched[0], disk):
                return [], []
        changed, removed = diff(self.recorded(), disk, paths)
        if paths is None and not changed and not removed and not plain("digest"):
            assert self._recorded is not None
            self._vouch(disk, self._recorded[0])
        return changed, removed

    def vouched(self) -> tuple[str, bytes] | None:
        """(version, digest) when a whole walk was found unchanged at the catalog's current version:
        a walk whose `fingerprint(version, walk)` is that digest means nothing changed since."""
        rows = self._metas("last_update", "fingerprint")
        version, digest = rows.get("last_update"), rows.get("fingerprint")
        return (version, digest) if version is not None and digest is not None else None

    def _vouch(self, disk: dict[str, Stat], version: str | None) -> None:
        """Record that a whole walk found the files as recorded at `version`.

        Best effort, and never waits: a read adds this only when no writer holds
        the catalog, and only while `version` is still the catalog's (a newer one
        makes the digest void anyway).
        """
        if version is not None:
            self._write_if_free(
                "INSERT OR REPLACE INTO meta SELECT 'fingerprint', ? "
                "WHERE (SELECT value FROM meta WHERE name = 'last_update') = ?",
                (fingerprint(version, disk), version),
            )

    def _write_if_free(self, sql: str, parameters: tuple[Any, ...]) -> None:
        """Run one write for a read, unless another process is writing the catalog: a read never waits."""
        with self._never_waiting() as db, db:
            db.execute(sql, parameters)

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

    # --- the superseded and expired documents of a version of the full-text index -------

    def mask(self, generation: str, key: tuple[bool, bool], now: float) -> tuple[float, float, set[int]] | None:
        """(since, until, document numbers) another process found hidden in `generation` of the
        full-text index (see index.Masks), if that holds at `now` (a timestamp); else None."""
        found = self._masks().get((generation, *key))
        try:
            if found is None or not found[0] <= now < found[1]:
                return None
            return found[0], found[1], set(array("q", found[2]))
        except (ValueError, TypeError, IndexError):
            return None  # not what remember_mask writes: found again, and written anew

    def remember_mask(
        self, generation: str, key: tuple[bool, bool], since: float, until: float, docs: set[int]
    ) -> None:
        """Keep a mask for the next one-shot processes (only the latest generation's; a read's write, see
        `_write_if_free`). A document number means the same document in one generation, in any process."""
        masks = {k: v for k, v in self._masks().items() if isinstance(k, tuple) and k[:1] == (generation,)}
        masks[(generation, *key)] = (since, until, array("q", sorted(docs)).tobytes())
        self._write_if_free("INSERT OR REPLACE INTO meta VALUES ('masks', ?)", (marshal.dumps(masks),))

    def _masks(self) -> dict[Any, Any]:
        """The kept masks by (generation, include_superseded, include_expired); {} when none or unreadable."""
        blob = self.meta("masks")
        try:
            masks = marshal.loads(blob) if blob else {}
        except (EOFError, ValueError, TypeError):
            return {}
        return masks if isinstance(masks, dict) else {}

    def write(
        self,
        rows: list[Row],
        removed: list[str],
        recorded: dict[str, Stat],
        segments: dict[str, int],
        walk: dict[str, Stat] | None,
    ) -> str:
        """Record a batch: its files' rows, the files gone, the new state; returns the new version.

        `walk`: the whole walk the batch came from (None for a batch of given paths);
        when the new state is exactly that walk, its digest is recorded too. What the
        batch changed is remembered (`changes`), with the version it was written over.
        """
        with self._connection() as db:
            db.execute("BEGIN IMMEDIATE")  # the version read next is the one this batch is written over
            before = db.execute("SELECT value FROM meta WHERE name = 'last_update'").fetchone()
            more = db.execute("SELECT value FROM meta WHERE name = 'state_more'").fetchone()
            db.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in removed])
            db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?)", rows)
            version = str(time.time())
            changed = {row[0]: recorded.get(row[0]) for row in rows} | dict.fromkeys(removed)
            _write_state(db, recorded, more[0] if more and walk is None else None, changed)
            db.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [
                    ("segments", json.dumps(segments)),
                    ("last_update", version),
                    ("fingerprint", fingerprint(version, walk) if walk is not None and recorded == walk else None),
                ],
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
            db.execute("DELETE FROM meta WHERE name IN ('state', 'state_more', 'segments', 'fingerprint', 'masks')")
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


def _version(db: sqlite3.Connection) -> float | None:
    """The catalog's version (`Catalog.last_update`) on this connection."""
    row = db.execute("SELECT value FROM meta WHERE name = 'last_update'").fetchone()
    return float(row[0]) if row and row[0] else None


def _state(blob: bytes | None, more: bytes | None = None) -> dict[str, Stat]:
    """The recorded state (see `recorded`) from its stored blobs: `state`, updated by `state_more`
    (path -> stat, or None for a file gone)."""
    with decoding("the catalog's state"):
        state = marshal.loads(blob) if blob else {}
        changed = marshal.loads(more) if more else {}
        if not isinstance(state, dict) or not isinstance(changed, dict):
            raise TypeError(f"a state of {type(state).__name__}, {type(changed).__name__}")
        for path, stat in changed.items():
            if stat is None:
                state.pop(path, None)
            else:
                state[path] = stat
        return state


def _write_state(db: sqlite3.Connection, state: dict[str, Stat], more: bytes | None, changed: dict[str, Any]) -> None:
    """Record `state`, which is the stored one with `changed` (path -> stat, or None: gone): only the
    changes, added to `state_more` (its blob as read in this transaction, None to write all), while
    they are few; else the whole state, and no `state_more`."""
    if more is not None and not plain("state_more"):
        with decoding("the catalog's state"):
            pending = marshal.loads(more)
        pending.update(changed)
        if len(pending) <= STATE_MORE:
            db.execute("INSERT OR REPLACE INTO meta VALUES ('state_more', ?)", (marshal.dumps(pending),))
            return
    db.execute("INSERT OR REPLACE INTO meta VALUES ('state', ?)", (marshal.dumps(state),))
    db.execute("INSERT OR REPLACE INTO meta VALUES ('state_more', ?)", (marshal.dumps({}),))


def _memories(rows: Iterable[tuple[Any, ...]]) -> list[Memory]:
    """The memories of catalog rows (their marshalled memory first)."""
    from .fastpath import row_decoder

    decoded = row_decoder()
    with decoding("a memory in the catalog"):
        return [decoded(marshal.loads(row[0])) for row in rows]


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


def fingerprint(version: str, disk: dict[str, Stat]) -> bytes:
    """A digest of a walk (paths with their stats, see `half_digest`) and the catalog version it matches.

    The walk is digested in its two halves (`fastpath.half_of`), so that two
    processes may walk one half each (`half_digest` of each, then `joined`).
    An unchanged folder lists in the same order, so an unchanged mind gives the
    same digest; anything else only costs the full diff.
    """
    from .fastpath import half_of

    halves: tuple[dict[str, Stat], dict[str, Stat]] = ({}, {})
    for path, stat in disk.items():
        halves[half_of(path)][path] = stat
    return joined(version, half_digest(halves[0]), half_digest(halves[1]))


def half_digest(walk: dict[str, Stat]) -> bytes:
    """A digest of the files of one half of a walk: their paths in walk order as bytes, and
    CPython's hash of the tuple of their stats (ints hash the same in every process, strings do not)."""
    digest = blake2b("\0".join(walk).encode("utf-8", "surrogateescape"), digest_size=20)
    digest.update(hash(tuple(walk.values())).to_bytes(8, "little", signed=True))
    return digest.digest()


def joined(version: str, first: bytes, second: bytes) -> bytes:
    """The digest of a whole walk from those of its halves, tied to a catalog version."""
    return blake2b(version.encode() + first + second, digest_size=20).digest()


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


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT)
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
    return db
