"""The index's process-level speed tricks: faster routes to the same answers as the plain path.

Every speed trick of memfile lives in memfile/index/ (and one, the quick exit,
in memfile/__main__.py). Each is proven equal to the plain path by
tests/test_plain_equivalence.py, and `MEMFILE_PLAIN=1` turns them all off
(`config.plain`; a comma-separated list of the names below turns off those
alone, to measure one). Their measured gains: docs/internals.md.

Here (Whoosh is never imported: every read runs this module):
- `walk`: the stat walk of a refresh in two halves, one in a forked child (`split_walk`, `Aside`);
- `walk`, `digest`: a read answered from the index while two children walk (`beside_walk`), when
  the catalog vouches by digest for the last whole walk (catalog.fingerprint, Catalog.stale);
- `bulk_child`: a bulk build in a fresh interpreter when this process runs threads (`build_apart`);
- `temp_child`: a bulk write's temp files made in a forked child while this process reads them back
  (`beside`, handed to `swap.put_all` by the writer);
- `scan_child`: an import's contents scanned for secrets in a forked child while this process checks
  its records (`aside`, handed to `transfer.importing.plan` by the Vault).
Elsewhere in the package: `scandir_fd` (source._opened_folder), `procs`, `codec` and `gc`
(store._bulk_options, write_codec.py, store._collector_paused), `row_new` (`row_decoder` here),
`formats` (persisted.IndexPositions/IndexExistence), `score_cache`
(score_cache.py), `masks` (store.Masks), `catalog_cache` (View._catalog_memories, Catalog.changes; the Vault's recall cache),
`parsed` (source.load: the memories a bulk write read back from its files, not parsed again).
"""

from __future__ import annotations

import gc
import json
import marshal
import os
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from ..config import plain
from ..files import die_with_parent
from ..model import Category, Memory, Priority, Source, Status, memory_from_row
from . import source
from .source import stat_walk

T = TypeVar("T")


def beside_walk(index: Any, work: Callable[[Any], T]) -> tuple[T] | None:
    """`(work(view),)` on the index as it is, while two forked children walk one half of the files each
    (`Aside`; a one-shot command then costs about the longer of the work and half a walk, not
    their sum); None when that answer cannot stand, and the caller refreshes first, as ever.

    It stands when the catalog recorded the digest of a walk that found nothing changed at its current
    version, the halves' digests join into that digest, and the catalog is still at that version;
    anything else (an edit, a write by another process meanwhile, no fork here, a watcher vouching
    instead) gets None.
    """
    from . import View
    from .catalog import half_digest, joined
    from .damage import IndexDamaged, stored_bytes
    from .store import RefreshReport

    store = index.store
    if store is None or plain("walk") or plain("digest") or source.watcher_vouches(index.root, index.mind):
        return None
    if not worth_forking(store):
        return None
    try:
        with stored_bytes():
            vouched = store.catalog.vouched()
    except IndexDamaged:
        return None  # the refresh finds the damage and repairs it
    if vouched is None:
        return None
    version, digest = vouched
    mind_dir, root = index.mind_dir, index.root

    def half(part: int) -> Callable[[], bytes]:
        return lambda: half_digest(stat_walk(mind_dir, root, part=part))

    walks = [Aside.start(half(part)) for part in (0, 1)]
    answer = None
    try:
        if None not in walks:
            answer = (work(View(index, RefreshReport())),)
    finally:
        walked = [walk.result() for walk in walks if walk is not None]
    first, second = walked if len(walked) == 2 else (None, None)
    if answer is None or first is None or second is None or joined(version, first, second) != digest:
        return None
    store = index.store
    with stored_bytes():
        if store is None or store.catalog.vouched() != vouched:
            return None
    return answer


def build_apart(root: Path, mind: str, progress: Callable[[int, int], None] | None = None) -> tuple[int, int, int]:
    """(added, updated, removed) by a fresh Python process bringing a mind's index in line, its progress
    relayed: a process running threads (MCP server, watcher) may not fork, and would load on one core.
    Best effort."""
    import subprocess
    import sys

    code = (
        "import os, sys\nfrom memfile.files import die_with_parent\ndie_with_parent(int(os.environ['MEMFILE_PARENT']))\n"
        "from memfile import Vault\ntell = lambda d, t: (d % 100 == 0 or d == t) and print(d, t, file=sys.stderr)\n"
        "r = Vault.open(sys.argv[1], sys.argv[2]).refresh(tell)\nprint(r.added, r.updated, r.removed)"
    )
    here = str(Path(__file__).resolve().parent.parent.parent)  # this memfile, wherever it was imported from
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])),
        "MEMFILE_PARENT": str(os.getpid()),
    }
    try:  # never the caller's standard streams: the MCP server speaks on them
        with subprocess.Popen(
            [sys.executable, "-c", code, str(root), mind],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as child:
            for line in child.stderr or ():  # to its end first: the one line on stdout never fills a pipe
                if progress is not None and len(told := line.split()) == 2 and "".join(told).isdigit():
                    progress(int(told[0]), int(told[1]))
            done = (child.stdout.read() if child.stdout else "").split()
        added, updated, removed = map(int, done) if child.returncode == 0 else (0, 0, 0)
    except (OSError, ValueError):  # no interpreter to start, or it failed
        return 0, 0, 0
    return added, updated, removed


def half_of(path: str) -> int:
    """Which half of a walk a memory file is in (0 or 1), by its name alone: the two halves
    of one walk are made in two processes (`split_walk`) and digested apart (`catalog.fingerprint`).
    A folder that could not be listed (`<folder>/`) goes by its length."""
    if path[-1] == "/":
        return len(path) & 1
    return (
        ord(path[-4]) + len(path) - path.rfind("/") - 1
    ) & 1  # the last character before ".md", plus the name's length


#: The fewest files the catalog records for a walk to be split with a forked child: below it the fork
#: costs more than half a walk saves (2,000 files: the stat-only check 42 % slower; docs/internals.md).
FORK_FROM = 5_000


def worth_forking(store: Any) -> bool:
    """Whether a walk of this index's mind is long enough to split (`FORK_FROM`); False without a catalog."""
    from .damage import IndexDamaged, stored_bytes

    if store is None:
        return False
    try:
        with stored_bytes():
            return store.catalog.file_count() >= FORK_FROM
    except IndexDamaged:
        return False  # the refresh finds the damage and repairs it


def split_walk(mind_dir: Path, root: Path, fork: bool = True) -> dict[str, Any]:
    """`stat_walk` on both cores: a forked child stats one half of the files (see `Aside`); with `fork`
    false (a small mind, see `worth_forking`) in this process alone."""
    if plain("walk") or not fork:
        return stat_walk(mind_dir, root)
    other = Aside.start(lambda: marshal.dumps(stat_walk(mind_dir, root, part=1)))
    if other is None:
        return stat_walk(mind_dir, root)
    try:
        found = stat_walk(mind_dir, root, part=0)
    finally:
        theirs = other.result()
    if theirs is None:  # the child failed: walk that half here
        return found | stat_walk(mind_dir, root, part=1)
    found.update(marshal.loads(theirs))
    return found


def may_fork() -> bool:
    """Whether this process may fork: no other thread runs (a child would copy the locks they hold)."""
    return threading.active_count() == 1


def aside(trick: str, compute: Callable[[], bytes]) -> Callable[[], bytes | None] | None:
    """`compute()` run in a forked child (`Aside`) for the speed trick `trick` while this process goes on:
    the wait for its bytes (None when it failed; call it once, also on the way out of an error), or None
    when it cannot run there or the trick is off (nothing ran)."""
    if plain(trick):
        return None
    other = Aside.start(compute)
    return None if other is None else other.result


def beside(job: Callable[[], None]) -> Callable[[], bool] | None:
    """`job` run in a forked child while this process goes on (`aside`): the wait for it (True when it
    succeeded), or None when it cannot run there (nothing ran). The trick `temp_child`: a bulk write's
    temp files made there while this process reads their contents back (`swap.prepare`)."""

    def run() -> bytes:
        job()
        return b""

    wait = aside("temp_child", run)
    return None if wait is None else (lambda: wait() is not None)


class Aside:
    """`compute()` run in a forked child while this process goes on (on the other core).

    `result()` waits for the child and gives the bytes it computed, or None when
    it failed. `start` gives None (nothing runs) where a fork is not safe: off
    Linux, or with other threads running (the child would copy locks they hold).
    The child dies with this process (`files.die_with_parent`) and leaves with
    `os._exit`: no exit handler, buffer or finaliser of this process runs twice.
    """

    def __init__(self, pid: int, pipe: int) -> None:
        self._pid, self._pipe = pid, pipe

    @classmethod
    def start(cls, compute: Callable[[], bytes]) -> Aside | None:
        if sys.platform != "linux" or not may_fork():
            return None
        read_end, write_end = os.pipe()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return None
        if pid == 0:  # the child
            code = 1
            try:
                die_with_parent(parent)  # it holds the writer lock its parent held (a forked copy of it)
                gc.disable()  # no finaliser of an object this process shares with its parent
                os.close(read_end)
                view = memoryview(compute())
                while view:
                    view = view[os.write(write_end, view) :]
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        return cls(pid, read_end)

    def result(self) -> bytes | None:
        """The child's bytes (None when it failed); waits for it. Call it once, also on the way out of an error."""
        chunks = []
        try:
            while chunk := os.read(self._pipe, 65536):
                chunks.append(chunk)
        finally:
            os.close(self._pipe)
            status = os.waitpid(self._pid, 0)[1]
        return b"".join(chunks) if os.waitstatus_to_exitcode(status) == 0 else None


def row_decoder() -> Callable[[tuple[Any, ...]], Memory]:
    """How rows the index stored become memories (`row_new`): `model.memory_from_row`, or the same Memory
    made without the frozen dataclass's `__init__`. The index holds rows of memories already checked, and
    a list or recall of a big mind decodes all of them: the fields set at once take a third of the time
    (tests/test_plain_equivalence.py and tests/test_index_package.py check every field comes back)."""
    return memory_from_row if plain("row_new") else _memory_from_row


_CATEGORIES, _PRIORITIES, _SOURCES, _STATUSES = (e._value2member_map_ for e in (Category, Priority, Source, Status))


def _memory_from_row(row: tuple[Any, ...]) -> Memory:
    (
        id_,
        mind,
        category,
        key,
        content,
        path,
        created,
        updated,
        priority,
        tags,
        source,
        verified,
        confidence,
        expires,
        extra,
        has_front_matter,
        id_derived,
        status,
        superseded_by,
    ) = row
    memory = object.__new__(Memory)
    memory.__dict__.update(
        id=id_,
        mind=mind,
        category=_CATEGORIES[category],
        key=key,
        content=content,
        path=path,
        created_at=datetime.fromisoformat(created),
        updated_at=datetime.fromisoformat(updated),
        priority=_PRIORITIES[priority],
        tags=tuple(tags),
        source=_SOURCES[source],
        verified=verified,
        confidence=confidence,
        expires_at=datetime.fromisoformat(expires) if expires else None,
        status=_STATUSES[status] if status else None,
        superseded_by=superseded_by,
        extra=tuple((k, v) for k, v in json.loads(extra)) if extra else (),
        has_front_matter=has_front_matter,
        id_derived=id_derived,
    )
    return memory
