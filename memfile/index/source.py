"""The files the index is a cache of: one file's stat and memory, the stat of a path now, all files parsed.

Files are the truth: these read them the way the index records them (the stat
that belongs to the bytes parsed), for the index and for the Vault's writes.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from .. import fileformat
from ..config import STATE_DIR
from ..errors import FileParseError
from ..files import (
    Stat,
    folder_stat,
    is_folder_entry,
    lock_holder,
    read_file,
    stat_of,
    stat_walk,
)
from ..model import Memory, ParseIssue
from ..paths import is_inside


def load(root: Path, mind_dir: Path, relpath: str) -> tuple[Stat, Memory]:
    """One file's stat and memory, read so that the stat belongs to the bytes parsed.

    Raises:
        FileParseError: the file cannot be read or parsed; for a folder the walk could not list
            (`<folder>/`), why it cannot be listed.
    """
    if is_folder_entry(relpath):
        raise FileParseError(relpath, None, f"folder cannot be read: {unlistable_reason(root / relpath)}")
    path = os.path.join(root, relpath)  # from our own walk; read_file refuses symlinks leading out

    def leads_inside(path: str) -> bool:
        return is_inside(Path(path), mind_dir)

    for _ in range(3):
        data, before, after = read_file(path, relpath, leads_inside)
        if before == after and len(data) == before[0]:
            break
    mtime = datetime.fromtimestamp(before[1] // 1_000_000_000, timezone.utc)
    return before, fileformat.parse(data, relpath, mtime)


def parse_all(root: Path, mind_dir: Path) -> tuple[list[Memory], list[ParseIssue]]:
    """Every memory, parsed from the files (when no index can be used), and the files that cannot be."""
    found, issues = [], []
    for relpath in sorted(stat_walk(mind_dir, root)):
        try:
            found.append(load(root, mind_dir, relpath)[1])
        except FileParseError as exc:
            issues.append(ParseIssue(exc.path, exc.line, exc.reason))
    return found, issues


def stat_now(root: Path, relpath: str) -> Stat | None:
    """The stat of a walk's path now, as the walk gives it (None: gone); for a folder the walk could not
    list (`<folder>/`), its `unlistable` stat while it still cannot be listed."""
    if is_folder_entry(relpath):
        return folder_stat(root / relpath)
    try:
        return stat_of(os.stat(os.path.join(root, relpath)))
    except OSError:
        return None


def unlistable_reason(folder: Path) -> str:
    try:
        with os.scandir(folder):
            return "it could not be listed"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def watcher_vouches(root: Path, mind: str) -> bool:
    """True when a live watcher of this mind has applied every change it has seen.

    Then the stat-only diff is skipped: the watcher removes its marker the
    moment it hears of a change and writes it back once the batch is indexed.
    """
    state = root / STATE_DIR
    return (state / f"watch-{mind}.clean").exists() and lock_holder(state / f"watch-{mind}.lock") is not None
