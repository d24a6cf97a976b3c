"""Putting a memory file in place without losing a save that lands at the same moment.

A write decides what to write from the bytes it read (`expected`). A person's
editor may save the same file between that read and the write: by renaming a
temp file over it (vim, VS Code, JetBrains) or by writing into it. A plain
rename over the path would drop that save without a trace. `put` instead
swaps the new file in and looks at what it displaced, in one step where the
system allows it (Linux `renameat2(RENAME_EXCHANGE)`): whatever was there is
in hand. When that is not what the write was based on, the save goes back in
place and `EditedMeanwhile` tells the caller to look again.

An editor that writes into the file holds it open for writing first, and its
save goes into the file it opened, wherever that file is by then. So the file
is replaced only under a read lease (Linux `F_SETLEASE`): never while another
program has it open for writing, and one that opens it for writing meanwhile
waits until the lease ends and finds it back in place.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from .errors import Conflict
from .files import TEMP_PREFIX, fsync_dir, new_file, read_or_none, temp_name

#: A write of this many files syncs the new ones to disk together (`prepare`), not one by one.
BULK_WRITE = 16
_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2
_AT_FDCWD = -100
T = TypeVar("T")
_UNSUPPORTED = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM, errno.EXDEV)


class EditedMeanwhile(Conflict):
    """The file changed on disk after the write read it: the change is kept, nothing was written."""

    def __init__(self, relpath: str, what: str = "was changed on disk while memfile was writing it") -> None:
        self.relpath = relpath
        super().__init__(
            f"{relpath} {what}; that change is kept as it is and nothing was written; run the command again"
        )


def put(
    path: Path, relpath: str, data: bytes | None, expected: bytes | None, prepared: Path | None = None
) -> bytes | None:
    """Make `path` hold `data` (None: remove it) when it holds `expected` (None: when it does not exist).

    `prepared`: a temp file beside `path` already holding `data` and synced by the caller, whose folder the
    caller also syncs afterwards (a write of many files: one sync for all, `Writer.apply_all`).

    Returns:
        What was there before (equal to `expected`).

    Raises:
        EditedMeanwhile: the file held something else; it is left (or put back) as it was.
    """
    if data is None:
        return _remove(path, relpath, expected)
    if prepared is None:  # else its temp file lies in the folder
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = prepared or new_file(temp_name(path), data)
    try:
        if expected is None:
            _create(tmp, path, relpath)
            displaced = None
        else:
            displaced = _replace(tmp, path, relpath, expected, data)
    finally:
        tmp.unlink(missing_ok=True)
    if prepared is None:
        fsync_dir(path.parent)
    return displaced


#: What a bulk write read back from a file it made: (bytes, the file's mtime in ns, what `check` made of them).
ReadBack = tuple[bytes, int, T]


def put_all(
    changes: list[tuple[str, Path, bytes | None]],
    bases: Mapping[str, bytes | None],
    check: Callable[[bytes, str, int | None], T],
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[bytes | None], dict[str, ReadBack[T]]]:
    """`put` each change (relpath, path, data) on what it was based: `bases[relpath]`, or no file at all.

    `check(data, relpath, mtime_ns)` refuses data that must not be written, before anything is put in
    place. A write of BULK_WRITE files or more is `prepare`d first, every new file with one mtime that it
    keeps once in place (a rename keeps the inode), and checked with it; what `check` returned comes back
    by relpath, and the caller syncs the folders. `progress`: (files checked, files to write).

    Returns:
        What each file held before (for `undo`), and what a bulk write read back.

    Raises:
        EditedMeanwhile: a file changed under the write; every file put so far is put back.
    """
    read_back: dict[str, ReadBack[T]] = {}
    prepared: dict[str, Path] = {}
    if progress is not None:
        check = _counted(check, progress, sum(data is not None for *_, data in changes))
    if len(changes) >= BULK_WRITE:
        mtime_ns = time.time_ns()  # every new file's, set as it is written

        def read_back_all() -> None:
            for relpath, _, data in changes:
                if data is not None:
                    read_back[relpath] = (data, mtime_ns, check(data, relpath, mtime_ns))

        prepared = prepare(changes, mtime_ns, read_back_all)
    else:
        for relpath, _, data in changes:
            if data is not None:
                check(data, relpath, None)
    before: list[bytes | None] = []
    try:
        for relpath, path, data in changes:
            before.append(put(path, relpath, data, bases.get(relpath), prepared.pop(relpath, None)))
    except BaseException:
        undo(changes[: len(before)], before)  # what was written before the refusal
        _remove_all(prepared.values())
        raise
    return before, read_back


def undo(changes: list[tuple[str, Path, bytes | None]], before: list[bytes | None]) -> None:
    """Put back what `put_all` wrote (newest first); a file saved by someone meanwhile keeps their save."""
    for (relpath, path, data), old in reversed(list(zip(changes, before))):
        try:
            put(path, relpath, old, data)
        except EditedMeanwhile:
            pass


def _counted(
    check: Callable[[bytes, str, int | None], T], progress: Callable[[int, int], None], total: int
) -> Callable[[bytes, str, int | None], T]:
    done = 0

    def counted(data: bytes, relpath: str, mtime_ns: int | None) -> T:
        nonlocal done
        value = check(data, relpath, mtime_ns)
        done += 1
        progress(done, total)
        return value

    return counted


def prepare(
    changes: list[tuple[str, Path, bytes | None]], mtime_ns: int, meanwhile: Callable[[], None] = lambda: None
) -> dict[str, Path]:
    """For a write of many files: each new content in a temp file beside its path, with this mtime, all
    synced by one sync (each is on disk before `put` renames it in place), then `meanwhile()` run.
    Returns relpath -> temp file, for `put(prepared=...)`; when `meanwhile` raises, no temp file is left.
    """
    prepared: dict[str, Path] = {}
    for relpath, path, data in changes:
        assert relpath not in prepared, f"{relpath} changed twice in one write"
        if data is not None:
            prepared[relpath] = temp_name(path)
    for folder in {path.parent for _, path, data in changes if data is not None}:
        folder.mkdir(parents=True, exist_ok=True)

    def write_all() -> None:
        for relpath, _, data in changes:
            if data is not None:
                new_file(prepared[relpath], data, durable=False, mtime_ns=mtime_ns)
        os.sync()

    try:
        write_all()
        meanwhile()
    except BaseException:
        _remove_all(prepared.values())
        raise
    return prepared


def _remove_all(temps: Iterable[Path]) -> None:
    for tmp in temps:
        tmp.unlink(missing_ok=True)


def _create(tmp: Path, path: Path, relpath: str) -> None:
    """`tmp` to `path`, never over a file that appeared there meanwhile."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise EditedMeanwhile(relpath) from None
    except OSError as exc:
        if exc.errno not in _UNSUPPORTED:  # a file system without hard links
            raise
        if path.exists() or path.is_symlink():
            raise EditedMeanwhile(relpath) from None
        os.replace(tmp, path)


def _replace(tmp: Path, path: Path, relpath: str, expected: bytes, data: bytes) -> bytes:
    """Swap `tmp` (the new bytes) with `path`; a save found displaced goes back in place."""
    with _leased(path, relpath) as unwritten:
        swapped = exchange(tmp, path)
        if swapped is None:  # this system cannot swap: look just before the rename
            if read_or_none(path) != expected or not unwritten(path):
                raise EditedMeanwhile(relpath)
            os.replace(tmp, path)
            return expected
        if not swapped:  # the file is gone (a save in the middle of renaming): look again later
            raise EditedMeanwhile(relpath)
        displaced = tmp.read_bytes()
        if displaced == expected and unwritten(tmp):
            return displaced
        # Someone saved between our read and the swap, or is saving into the file now: it goes back. If
        # they saved once more after the swap, that newest save stays (the one in between was theirs too).
        exchange(tmp, path)
        if tmp.read_bytes() != data:
            exchange(tmp, path)
        raise EditedMeanwhile(relpath)


@contextmanager
def _leased(path: Path, relpath: str) -> Iterator[Callable[[Path], bool]]:
    """A read lease on the file at `path` while it is replaced: yields `unwritten(where)`, true while that
    file is at `where` and no program opened it for writing since (such an open waits until the lease
    ends). Where leases are not to be had (another system, another user's file, a symlink) it is always true.

    Raises:
        EditedMeanwhile: another program has the file open for writing (a save into it under way).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # gone or a symlink: the swap finds out what is there
        fd = -1
    try:
        held = os.fstat(fd) if fd >= 0 and _lease(fd, relpath) else None

        def unwritten(where: Path) -> bool:
            if held is None:
                return True
            try:
                now = os.lstat(where)
            except FileNotFoundError:
                return False
            same = (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)
            return same and fcntl.fcntl(fd, fcntl.F_GETLEASE) == fcntl.F_RDLCK

        yield unwritten
    finally:
        if fd >= 0:
            os.close(fd)  # ends the lease: a program waiting to open the file goes on


def _lease(fd: int, relpath: str) -> bool:
    """Take a read lease on the open file `fd`; False where the system gives none (leases switched off,
    another user's file, no leases at all)."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)  # ignored by default, until F_SETOWN below
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    except AttributeError:
        return False
    except OSError as exc:
        if exc.errno == errno.EAGAIN:
            raise EditedMeanwhile(relpath, "is open for writing in another program") from None
        return False
    fcntl.fcntl(fd, fcntl.F_SETOWN, 0)  # a lease broken by an open signals no process: `unwritten` asks
    return True


def _remove(path: Path, relpath: str, expected: bytes | None) -> bytes | None:
    aside = path.parent / f"{TEMP_PREFIX}{path.name}.{os.urandom(6).hex()}.old"
    with _leased(path, relpath) as unwritten:
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            if expected is not None:
                raise EditedMeanwhile(relpath) from None
            return None
        displaced = aside.read_bytes()
        if displaced != expected or not unwritten(aside):
            try:
                os.link(aside, path)  # back in place, unless a newer save is there already
            except FileExistsError:
                pass
            aside.unlink()
            raise EditedMeanwhile(relpath)
        aside.unlink()
    fsync_dir(path.parent)
    return displaced


def exchange(one: Path, other: Path) -> bool | None:
    """Swap two paths in one step: True when done, False when `other` does not exist, None where unsupported."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return None
    import ctypes

    if renameat2(_AT_FDCWD, os.fsencode(one), _AT_FDCWD, os.fsencode(other), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code == errno.ENOENT:
        return False
    if code in _UNSUPPORTED:
        return None
    raise OSError(code, os.strerror(code), str(other))


@cache
def _renameat2() -> Any:
    """glibc's renameat2 (Linux 3.15+, glibc 2.28+), or None."""
    import ctypes

    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function
