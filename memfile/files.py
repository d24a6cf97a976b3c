"""The file system: atomic writes, reading one file with its stat, the writer lock (and the children
that must never outlive the process holding it).

A file's stat, as the index records it, is (size, mtime_ns, ctime_ns, inode):
the ctime moves on every change to a file, `os.utime` putting the mtime back
included, and is set by the kernel, never by a program (git's stat data).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from .errors import Conflict, FileParseError, LockTimeout
from .fileformat import MAX_FILE_BYTES

TEMP_PREFIX = ".memfile-tmp-"


#: A file's stat as the index records it: (size, mtime_ns, ctime_ns, inode).
Stat = tuple[int, int, int, int]


def stat_of(info: os.stat_result) -> Stat:
    return info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino


def read_file(path: str, relpath: str, follow: Callable[[str], bool]) -> tuple[bytes, Stat, Stat]:
    """A memory file's bytes, and its stat (`Stat`) from the open file just before and just after
    reading them (a short read or a change shows as a difference: read again).

    Raises:
        FileParseError: a symlink that `follow(path)` refuses, not a regular file, too big, unreadable.
    """
    try:
        try:  # one system call for a plain file, where a look first takes two; opening never blocks on a FIFO
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError:
            if not os.path.islink(path):  # ELOOP on Linux and macOS, EMLINK on FreeBSD
                raise
            if not follow(path):
                raise FileParseError(relpath, None, "symlink leads outside the mind folder") from None
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):  # a FIFO or device named *.md would block or never end
                raise FileParseError(relpath, None, "not a regular file")
            if info.st_size > MAX_FILE_BYTES:
                raise FileParseError(relpath, None, f"file is larger than {MAX_FILE_BYTES // 2**20} MB")
            data = os.read(fd, info.st_size + 1)
            after = os.fstat(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise FileParseError(relpath, None, f"cannot be read: {exc.strerror}") from None
    return data, stat_of(info), stat_of(after)


def read_or_none(path: Path) -> bytes | None:
    """The file's bytes, or None when there is no file."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def atomic_write(path: Path, data: bytes, durable: bool = True, mode: int = 0o644) -> None:
    """Replace `path` with `data` (a file of `mode`) so that a reader sees the old or the new bytes, never a mix.

    The temp file is unique, dot-prefixed (so no walk reads it as a memory),
    in the same folder, fsynced, then renamed over the target; the folder is
    fsynced so the rename survives a power cut. `durable=False` skips both
    fsyncs, for records a power cut may lose (never a memory).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = new_file(temp_name(path), data, durable, mode=mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def temp_name(path: Path) -> Path:
    """A unique, dot-prefixed name beside `path` for its temp file (no walk reads it)."""
    return path.parent / f"{TEMP_PREFIX}{path.name}.{os.urandom(6).hex()}"


def new_file(tmp: Path, data: bytes, durable: bool = True, mtime_ns: int | None = None, mode: int = 0o644) -> Path:
    """Create `tmp` (never over an existing file) holding `data`, fsynced when durable, with this mtime
    when given (else the kernel's: now). Removed again when the write fails."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mtime_ns is not None:
                os.utime(handle.fileno(), ns=(mtime_ns, mtime_ns))
            if durable:
                os.fsync(handle.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def writer_lock(lock_path: Path, timeout: float) -> Iterator[None]:
    """Hold the vault's writer lock (an flock, so a killed holder releases it at once).

    Raises:
        LockTimeout: when another process holds it for longer than `timeout` seconds.
    """
    with try_writer_lock(lock_path, timeout) as held:
        if not held:
            raise LockTimeout(str(lock_path), timeout)
        yield


@contextmanager
def try_writer_lock(lock_path: Path, timeout: float = 0) -> Iterator[bool]:
    """Take the vault's writer lock, waiting at most `timeout` seconds for it: True inside, else False."""
    fd = _lock_file(lock_path)
    try:
        deadline = time.monotonic() + timeout
        delay = 0.005
        while not (held := _flocked(fd)) and time.monotonic() < deadline:
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        try:
            yield held
        finally:
            if held:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _flocked(fd: int) -> bool:
    """Take the exclusive flock of `fd` if no other process holds it: True, else False."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EAGAIN, errno.EACCES):
            raise
        return False
    return True


def _lock_file(lock_path: Path) -> int:
    """A descriptor of the lock file, made with its folder when missing (a file in the way of the folder is a
    NotADirectoryError, as for any other path through a file)."""
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # mkdir's word for a file where the folder should be
        raise NotADirectoryError(errno.ENOTDIR, "a file is in the way of a folder", str(lock_path.parent)) from None
    return os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)


def lock_holder(path: Path) -> int | None:
    """The pid written in a lock file whose flock some process holds now, else None."""
    text = lock_text(path)
    if text is None:
        return None
    first = text.split(maxsplit=1)[0] if text else ""
    return int(first) if first.isdigit() else -1


def lock_text(path: Path) -> str | None:
    """What is written in a lock file whose flock some process holds now (its pid first), else None."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def hold_lock(path: Path, text: str) -> int | None:
    """Take the flock of a lock file for as long as the returned descriptor stays open, and write
    `text` in it (the holder's pid first: `lock_holder`, `lock_text`); None when another process holds it."""
    fd = _lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode("utf-8") + b"\n", 0)
    return fd


@contextmanager
def cannot_write(root: Path) -> Iterator[None]:
    """The file system refusing a write (read-only, full, a file where a folder must be) as a clear error."""
    try:
        yield
    except OSError as exc:
        reason = WHY_NOT.get(exc.errno or 0)
        if reason is None:
            raise
        where = f" ({exc.filename})" if exc.filename else ""
        raise Conflict(f"memfile cannot write in the vault {root}{where}: {reason}; nothing was changed") from None


def os_reason(exc: OSError) -> str:
    """What the file system said, as `cannot_write` says it where it can."""
    return WHY_NOT.get(exc.errno or 0) or exc.strerror or str(exc)


WHY_NOT = {
    errno.EACCES: "permission denied (make the vault writable, or run as its owner)",
    errno.EPERM: "the operation is not permitted there",
    errno.EROFS: "the file system is read-only (reads still work)",
    errno.ENOSPC: "the disk is full (free some space, then try again)",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.ENOTDIR: "a file is in the way where memfile needs a folder (move that file away)",
    errno.EEXIST: "a file is in the way where memfile needs a folder (move that file away)",
    errno.EISDIR: "a folder is in the way where memfile needs a file (move that folder away)",
}


def die_with_parent(parent: int) -> None:
    """In a child process of `parent` (Linux): be killed when the parent dies (`PR_SET_PDEATHSIG`), and leave
    at once when it is gone already. A forked child holds the writer lock its parent held, and a git child
    git's own locks: killed with a memfile, neither may keep the vault locked."""
    if sys.platform != "linux":
        return
    _prctl()(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def dying_with_parent() -> dict[str, Any]:
    """`subprocess.Popen` arguments that make the child die with this process (`die_with_parent`), on Linux
    in a process running no other thread. A threaded process (a server) starts its children without them:
    a child set up by Python code is forked, not spawned, there, which is unsafe beside other threads and
    copies the whole memory map of a big server for every git it runs (76 ms at 400 MB against 5 ms); its
    git lives on for the moment git takes, and the next write waits for it (`git.locks.clear_stale_locks`)."""
    if sys.platform != "linux" or threading.active_count() > 1:
        return {}
    _prctl()  # loaded here, not in the child
    parent = os.getpid()
    return {"preexec_fn": lambda: die_with_parent(parent)}


#: While `forks_die_with_this_process` lasts: the process whose forked children die with it (else 0).
_FORKS_DIE = [0]


def may_fork() -> bool:
    """Whether this process may fork: no other thread runs (a child would copy the locks they hold)."""
    return threading.active_count() == 1


@contextmanager
def forks_die_with_this_process() -> Iterator[None]:
    """While it lasts, every child this process forks (`os.fork`, as multiprocessing does for Whoosh's
    subwriters, each holding a copy of the locks this process holds) dies with it (`die_with_parent`)."""
    if sys.platform == "linux":
        _at_fork_once()
    _FORKS_DIE[0] = os.getpid()
    try:
        yield
    finally:
        _FORKS_DIE[0] = 0


@cache
def _at_fork_once() -> None:
    _prctl()
    os.register_at_fork(after_in_child=_forked)


def _forked() -> None:
    parent, _FORKS_DIE[0] = _FORKS_DIE[0], 0
    if parent:
        die_with_parent(parent)


@cache
def _prctl() -> Callable[[int, int], int]:
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl
