"""What counts as a damaged index, and what as an index that cannot be written.

The index is a cache: damaged stored bytes are no one's mistake, and the
index is rebuilt from the files with a notice. A bug in memfile is not
damage: it must reach the user (exit 1, a traceback under `--debug`) and
leave the index as it is. So only errors raised where Whoosh or SQLite
decode stored bytes become `IndexDamaged`:

- any `sqlite3.DatabaseError` but a misuse of the API (ProgrammingError, InterfaceError);
- what reading damaged files raises whoever reads them (OSError, EOFError,
  struct.error, zlib.error, pickle's UnpicklingError);
- any other exception whose innermost frame outside the standard library is
  Whoosh's own code (Whoosh decoding a segment, a TOC, a posting list);
- what memfile's own decoders of stored rows raise (`decoding`).

An error of the file system or of SQLite meaning the index may not be
written there (read-only media, no permission, a full disk) is
`IndexUnwritable`: the index then lives in memory.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager


class IndexDamaged(Exception):
    """The index's stored bytes cannot be decoded: it is rebuilt from the files.

    Attributes:
        kind: the name of what was raised where the bytes were decoded (told in the notice).
    """

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


class IndexUnwritable(Exception):
    """The index may not be written where it is (read-only media, no permission, a full disk).

    Attributes:
        why: what the file system or SQLite said.
    """

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


#: What the file system says when memfile may not write its index there.
_CANNOT_WRITE = frozenset(
    {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR, errno.EEXIST, errno.EISDIR}
)
#: What SQLite says for the same (it gives no errno).
_SQLITE_CANNOT_WRITE = ("readonly", "disk is full", "unable to open", "disk I/O error")
#: Raised by reading damaged bytes, wherever they are read: (module, name); a module not loaded yet
#: raised nothing (Whoosh loads pickle, struct and zlib to read its files).
_DECODING = (("struct", "error"), ("zlib", "error"), ("_pickle", "UnpicklingError"), ("pickle", "UnpicklingError"))


def cannot_write(exc: BaseException) -> bool:
    """Whether an error opening or writing the index means it cannot be written there (read-only media,
    no permission, a full disk, a file where its folder should be), not that it is damaged."""
    if isinstance(exc, OSError):
        return exc.errno in _CANNOT_WRITE
    return isinstance(exc, sqlite3.OperationalError) and any(word in str(exc) for word in _SQLITE_CANNOT_WRITE)


def _why(exc: BaseException) -> str:
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)


def is_damage(exc: BaseException) -> bool:
    """Whether `exc` was raised where Whoosh or SQLite decode stored bytes (see the module's docstring)."""
    if isinstance(exc, IndexDamaged):
        return True
    if isinstance(exc, sqlite3.DatabaseError):
        return not isinstance(exc, sqlite3.ProgrammingError | sqlite3.InterfaceError)
    if isinstance(exc, OSError | EOFError):
        return True
    for module, name in _DECODING:
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(exc, getattr(loaded, name)):
            return True
    return isinstance(exc, Exception) and _raised_in_whoosh(exc)


@contextmanager
def stored_bytes() -> Iterator[None]:
    """Around the index's work on its stored files: damage becomes `IndexDamaged`, an error saying the
    index cannot be written `IndexUnwritable`; anything else (a bug in memfile) goes on as it is."""
    try:
        yield
    except (IndexDamaged, IndexUnwritable):
        raise
    except Exception as exc:
        if cannot_write(exc):
            raise IndexUnwritable(_why(exc)) from exc
        if is_damage(exc):
            raise IndexDamaged(type(exc).__name__, str(exc)) from exc
        raise


@contextmanager
def decoding(what: str) -> Iterator[None]:
    """Around memfile's own decoding of bytes the index stored (`what` names them): what a damaged
    blob makes `marshal` or a row's decoder raise is `IndexDamaged`."""
    try:
        yield
    except (EOFError, ValueError, TypeError, IndexError, KeyError) as exc:
        raise IndexDamaged(type(exc).__name__, f"{what}: {exc}") from exc


#: The standard library's folder (pickle, struct and importlib frames sit between Whoosh and an error).
_STDLIB = os.path.normcase(os.path.dirname(os.__file__)) + os.sep


def _raised_in_whoosh(exc: BaseException) -> bool:
    """Whether the innermost frame of `exc` outside the standard library (pickle, struct, importlib
    under a Whoosh read) is Whoosh's own code."""
    whoosh = sys.modules.get("whoosh")
    if whoosh is None or not getattr(whoosh, "__path__", None):
        return False
    home = os.path.normcase(os.path.dirname(whoosh.__path__[0])) + os.sep + "whoosh" + os.sep
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(os.path.normcase(tb.tb_frame.f_code.co_filename))
        tb = tb.tb_next
    for filename in reversed(frames):
        if filename.startswith("<frozen") or filename.startswith(_STDLIB) and "site-packages" not in filename:
            continue
        return filename.startswith(home)
    return False
