"""The index's speed tricks that are not Whoosh's: faster routes to the same answers as the plain path.

Each is proven equal to the plain path by a test, and `MEMFILE_PLAIN=1` turns
them all off. Whoosh is never imported here: every read runs this module.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..files import Aside, stat_walk
from . import source
from .catalog import half_digest, joined
from .store import RefreshReport

T = TypeVar("T")


def beside_walk(index: Any, work: Callable[[Any], T]) -> tuple[T] | None:
    """`(work(view),)` on the index as it is, while two forked children walk one half of the files each
    (`files.Aside`; a one-shot command then costs about the longer of the work and half a walk, not
    their sum); None when that answer cannot stand, and the caller refreshes first, as ever.

    It stands when the catalog recorded the digest of a walk that found nothing changed at its current
    version, the halves' digests join into that digest, and the catalog is still at that version;
    anything else (an edit, a write by another process meanwhile, no fork here, a watcher vouching
    instead) gets None.
    """
    from . import View
    from .damage import IndexDamaged, stored_bytes

    store = index.store
    if store is None or source.watcher_vouches(index.root, index.mind):
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
    walks = [Aside.start(lambda part=part: half_digest(stat_walk(mind_dir, root, part=part))) for part in (0, 1)]
    answer = None
    try:
        if None not in walks:
            answer = (work(View(index, RefreshReport())),)
    finally:
        walked = [walk.result() for walk in walks if walk is not None]
    if answer is None or None in walked or joined(version, *walked) != digest:  # type: ignore[misc]
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

    code = ("import sys\nfrom memfile import Vault\ntell = lambda d, t: (d % 100 == 0 or d == t) and print(d, t, file=sys.stderr)\n"
            "r = Vault.open(sys.argv[1], sys.argv[2]).refresh(tell)\nprint(r.added, r.updated, r.removed)")
    here = str(Path(__file__).resolve().parent.parent.parent)  # this memfile, wherever it was imported from
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
