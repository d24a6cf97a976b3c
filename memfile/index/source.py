"""The files the index is a cache of: the walk over a mind's files, one file's stat and memory, all parsed.

Files are the truth: these read them the way the index records them (the stat
that belongs to the bytes parsed), for the index and for the Vault's writes.
A file's stat, as the index records it, is (size, mtime_ns, ctime_ns, inode):
the ctime moves on every change to a file, `os.utime` putting the mtime back
included, and is set by the kernel, never by a program (git's stat data).
"""

from __future__ import annotations

import errno
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import fileformat
from ..config import STATE_DIR, plain
from ..errors import FileParseError
from ..files import Stat, lock_holder, read_file, stat_of
from ..model import Memory
from ..paths import is_ignored_name, is_inside, is_utf8_name

#: The size in the stat of a folder that cannot be listed (the walk's entry `<folder>/`; its inode is the errno).
UNLISTABLE = -2


#: A file's bytes, its mtime (ns) and the memory `parse_as_read` made of them: what a writer that wrote the
#: file and read it back already knows (`load`'s `known`).
Known = tuple[bytes, int, Memory]


def parse_as_read(data: bytes, relpath: str, mtime_ns: int) -> Memory:
    """The memory the index records for a file holding `data` with this mtime (a file without dates in its
    front-matter takes them from its mtime, to the second).

    Raises:
        FileParseError: the bytes cannot be parsed.
    """
    return fileformat.parse(data, relpath, datetime.fromtimestamp(mtime_ns // 1_000_000_000, timezone.utc))


def load(root: Path, mind_dir: Path, relpath: str, known: Known | None = None) -> tuple[Stat, Memory]:
    """One file's stat and memory, read so that the stat belongs to the bytes parsed.

    `known`: what the writer of the file parsed (a speed trick, `parsed`): when the file holds those
    bytes with an mtime of the same second, its memory is what `parse_as_read` would make again, so it is
    taken as it is (an import of 10,000 memories read each one twice).

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
    if (
        known is not None
        and known[1] // 1_000_000_000 == before[1] // 1_000_000_000
        and known[0] == data
        and not plain("parsed")
    ):
        return before, known[2]
    return before, parse_as_read(data, relpath, before[1])


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


def stat_walk(mind_dir: Path, root: Path, stat: bool = True) -> dict[str, Any]:
    """Vault-relative path -> `Stat` of every memory file under a mind folder.

    Dot-folders, editor temp files and symlinked folders are skipped (a symlinked
    folder could lead outside the mind); `os.scandir` gives the stat without a second call.
    A folder that cannot be listed (no permission) is an entry of its own, its path with a
    trailing `/` and the stat `unlistable(errno)`: unreadable, like a file that cannot be read,
    never taken for empty. One that went away meanwhile is skipped.
    With `stat=False` only the names are listed (the values are None): a tenth of the time.
    """
    found: dict[str, Any] = {}
    prefix = len(str(root)) + 1
    pending = [str(mind_dir)]
    while pending:
        folder = pending.pop()
        relative = folder[prefix:].replace(os.sep, "/") + "/"
        try:
            with os.scandir(folder) as entries:
                for entry in entries:  # the hot loop of every read without a watcher: cheapest test first
                    name = entry.name
                    if name[0] == ".":
                        continue
                    try:  # an entry removed meanwhile is skipped; the rest of its folder is still listed
                        if name[-3:] == ".md" and not entry.is_dir(follow_symlinks=False):
                            if not name.isascii() and not is_utf8_name(name):
                                continue
                            info = entry.stat() if stat else None
                            found[relative + name] = (
                                (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino) if info else None
                            )
                        elif entry.is_dir(follow_symlinks=False) and not is_ignored_name(name):
                            pending.append(folder + os.sep + name)
                    except OSError:
                        continue
        except OSError as exc:
            if exc.errno in _GONE:  # the folder went away before or while it was read
                continue
            found[relative] = unlistable(exc.errno or 0) if stat else None
    return found


#: What listing a folder that went away (or was replaced by a file) meanwhile raises.
_GONE = (errno.ENOENT, errno.ENOTDIR)


def unlistable(code: int) -> Stat:
    """The stat the walk gives a folder it cannot list (`code`: the errno)."""
    return UNLISTABLE, 0, 0, code


def is_folder_entry(relpath: str) -> bool:
    """Whether a walk's path is a folder that could not be listed (see `stat_walk`)."""
    return relpath[-1:] == "/"


def folder_stat(path: Path) -> Stat | None:
    """A folder's entry stat as the walk gives it now: `unlistable(errno)`, None when it lists (or is gone)."""
    try:
        with os.scandir(path):
            return None
    except OSError as exc:
        return None if exc.errno in _GONE else unlistable(exc.errno or 0)
