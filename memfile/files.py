"""The file system: atomic writes, the walk over a mind's files, the writer lock.

A file's stat, as the index records it, is (size, mtime_ns, ctime_ns, inode):
the ctime moves on every change to a file, `os.utime` putting the mtime back
included, and is set by the kernel, never by a program (git's stat data).
"""

from __future__ import annotations

import errno
import fcntl
import gc
import marshal
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .errors import FileParseError, LockTimeout
from .fileformat import MAX_FILE_BYTES
from .paths import is_ignored_name, is_utf8_name

TEMP_PREFIX = ".memfile-tmp-"


#: A file's stat as the index records it: (size, mtime_ns, ctime_ns, inode).
Stat = tuple[int, int, int, int]
#: The size in the stat of a folder that cannot be listed (the walk's entry `<folder>/`; its inode is the errno).
UNLISTABLE = -2


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


def atomic_write(path: Path, data: bytes, durable: bool = True) -> None:
    """Replace `path` with `data` so that a reader sees the old or the new bytes, never a mix.

    The temp file is unique, dot-prefixed (so no walk reads it as a memory),
    in the same folder, fsynced, then renamed over the target; the folder is
    fsynced so the rename survives a power cut. `durable=False` skips both
    fsyncs, for records a power cut may lose (never a memory).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{TEMP_PREFIX}{path.name}.{os.urandom(6).hex()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove(path: Path) -> None:
    path.unlink()
    fsync_dir(path.parent)


def stat_walk(mind_dir: Path, root: Path, stat: bool = True, part: int | None = None) -> dict[str, Any]:
    """Vault-relative path -> `Stat` of every memory file under a mind folder.

    Dot-folders, editor temp files and symlinked folders are skipped (a symlinked
    folder could lead outside the mind); `os.scandir` gives the stat without a second call.
    A folder that cannot be listed (no permission) is an entry of its own, its path with a
    trailing `/` and the stat `unlistable(errno)`: unreadable, like a file that cannot be read,
    never taken for empty. One that went away meanwhile is skipped.
    With `stat=False` only the names are listed (the values are None): a tenth of the time.
    With `part` (0 or 1), only the files of that half (`half_of`), in the order of a whole walk.
    """
    found: dict[str, Any] = {}
    prefix = len(str(root)) + 1
    pending = [str(mind_dir)]
    while pending:
        folder = pending.pop()
        relative = folder[prefix:].replace(os.sep, "/") + "/"
        try:
            with _opened_folder(folder) as listed, os.scandir(listed) as entries:
                _list_folder(entries, folder, relative, stat, found, pending, part)
        except OSError as exc:
            if exc.errno in _GONE:  # the folder went away before or while it was read
                continue
            if part is None or half_of(relative) == part:
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


@contextmanager
def _opened_folder(folder: str) -> Iterator[int | str]:
    """What `os.scandir` lists `folder` from: a descriptor of it where the system allows, so that each
    entry's stat looks up its name in the folder (`fstatat`) instead of its whole path (a sixth faster)."""
    if os.scandir not in os.supports_fd:
        yield folder
        return
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield descriptor
    finally:
        os.close(descriptor)


def half_of(path: str) -> int:
    """Which half of a walk a memory file is in (0 or 1), by its name alone: the two halves
    of one walk are made in two processes (`split_walk`) and digested apart (`catalog.fingerprint`).
    A folder that could not be listed (`<folder>/`) goes by its length."""
    if path[-1] == "/":
        return len(path) & 1
    return (ord(path[-4]) + len(path) - path.rfind("/") - 1) & 1  # the last character before ".md", plus the name's length


def split_walk(mind_dir: Path, root: Path) -> dict[str, Any]:
    """`stat_walk` on both cores: a forked child stats one half of the files (see `Aside`)."""
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


def _list_folder(entries: Iterator[os.DirEntry[Any]], folder: str, relative: str, stat: bool, found: dict[str, Any],
                 pending: list[str], part: int | None) -> None:
    """`stat_walk`'s hot loop, over one folder: every read without a watcher runs it; cheapest test first."""
    for entry in entries:
        name = entry.name
        if name[0] == ".":
            continue
        try:  # an entry removed meanwhile is skipped; the rest of its folder is still listed
            if name[-3:] == ".md" and not entry.is_dir(follow_symlinks=False):
                # `half_of(name) != part`, inlined: this loop runs once per file of the mind
                if (part is not None and (ord(name[-4]) + len(name)) & 1 != part) or (not name.isascii() and not is_utf8_name(name)):
                    continue
                info = entry.stat() if stat else None
                found[relative + name] = (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino) if info else None
            elif entry.is_dir(follow_symlinks=False) and not is_ignored_name(name):
                pending.append(folder + os.sep + name)
        except OSError:
            continue


#: The pipe buffer a command's output asks for (Linux's default limit for any user; the usual buffer is 64 KiB).
PIPE_BYTES = 1 << 20


def roomy_pipe(fd: int) -> None:
    """Ask for a 1 MiB buffer when `fd` is a pipe (Linux): a recall's megabytes then reach the reader
    in about a sixteenth of the wakeups. Nothing happens elsewhere, or when the system refuses."""
    if sys.platform != "linux":
        return
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)  # EBADF unless a pipe: then nothing changes
    except OSError:  # not a pipe, or over the per-user limit of pipe memory
        pass


def may_fork() -> bool:
    """Whether this process may fork: no other thread runs (a child would copy the locks they hold)."""
    return threading.active_count() == 1


class Aside:
    """`compute()` run in a forked child while this process goes on (on the other core).

    `result()` waits for the child and gives the bytes it computed, or None when
    it failed. `start` gives None (nothing runs) where a fork is not safe: off
    Linux, or with other threads running (the child would copy locks they hold).
    The child leaves with `os._exit`: no exit handler, buffer or finaliser of
    this process runs twice.
    """

    def __init__(self, pid: int, pipe: int) -> None:
        self._pid, self._pipe = pid, pipe

    @classmethod
    def start(cls, compute: Callable[[], bytes]) -> Aside | None:
        if sys.platform != "linux" or not may_fork():
            return None
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return None
        if pid == 0:  # the child
            code = 1
            try:
                gc.disable()  # no finaliser of an object this process shares with its parent
                os.close(read_end)
                view = memoryview(compute())
                while view:
                    view = view[os.write(write_end, view):]
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


@contextmanager
def writer_lock(lock_path: Path, timeout: float) -> Iterator[None]:
    """Hold the vault's writer lock (an flock, so a killed holder releases it at once).

    Raises:
        LockTimeout: when another process holds it for longer than `timeout` seconds.
    """
    fd = _lock_file(lock_path)
    try:
        deadline = time.monotonic() + timeout
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise LockTimeout(str(lock_path), timeout) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def try_writer_lock(lock_path: Path) -> Iterator[bool]:
    """Take the vault's writer lock if it is free (True inside), without waiting for it (False)."""
    fd = _lock_file(lock_path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _lock_file(lock_path: Path) -> int:
    """A descriptor of the lock file, made with its folder when missing.

    Raises:
        OSError: memfile's state folder cannot be written (read-only, full, or a file in the
            way: then NotADirectoryError, as for any other path through a file).
    """
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # mkdir's word for a file where the folder should be
        raise NotADirectoryError(errno.ENOTDIR, "a file is in the way of a folder", str(lock_path.parent)) from None
    return os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)


def lock_holder(path: Path) -> int | None:
    """The pid written in a lock file whose flock some process holds now, else None."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else -1
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)

