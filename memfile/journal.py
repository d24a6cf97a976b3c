"""The journal of a write of several files (an import, a batch of stores, a store superseding another):
what a write killed before its commit put in place, undone by the next write.

`.memfile/unfinished-write` (JSON: the write's mind, commit message and files, each with the SHA-256 of
the bytes it puts there, null for a removal) exists from before the write's first file is put until it
is committed or put back. A write killed meanwhile leaves it, and the next write, holding the writer
lock, puts back every file that still holds what the killed one put there (a person's save since is
kept), unstages them and removes its temp files: like a store, an import that never answered is not
there at all. One file is put in place by one rename, so a write of one file needs no journal.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from .config import STATE_DIR
from .errors import MemfileError
from .files import TEMP_PREFIX, atomic_write, read_or_none
from .paths import safe_paths

if TYPE_CHECKING:
    from .git import GitStore

UNFINISHED_WRITE = "unfinished-write"


@contextmanager
def journaled(
    root: Path, mind: str, writes: list[tuple[str, Path, bytes | None]], message: str, git: GitStore
) -> Iterator[None]:
    """The write of several files `writes` (relpath, path, bytes or None) recorded while it runs, with the
    commit HEAD was on; the record stays when it is killed, or fails with a file still as it put it."""
    if len(writes) < 2:
        yield
        return
    path = root / STATE_DIR / UNFINISHED_WRITE
    files = {rel: _digest(data) for rel, _, data in writes}
    record = {"mind": mind, "message": message, "head": git.head() if git.exists() else None, "files": files}
    atomic_write(path, json.dumps(record, ensure_ascii=False).encode("utf-8"), durable=False)
    try:
        yield
    except BaseException:
        if not any(_digest(read_or_none(full)) == files[rel] for rel, full, _ in writes):
            path.unlink(missing_ok=True)
        raise
    path.unlink(missing_ok=True)


def undo_killed_write(root: Path, git: GitStore) -> tuple[str, list[str]] | None:
    """For a caller holding the writer lock: undo the write a killed memfile left (see the module
    docstring). A notice and the files it put back, or None when no write was left unfinished."""
    path = root / STATE_DIR / UNFINISHED_WRITE
    try:
        record = json.loads(path.read_bytes())
        message, files = record["message"], record["files"]
        paths = dict(zip(files, safe_paths(root, list(files), record["mind"]), strict=True))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, LookupError, TypeError, MemfileError):  # cut short as it was made: nothing was put
        path.unlink(missing_ok=True)
        return None
    last = git.log(limit=1, names=False)
    if last and last[0].sha != record.get("head") and f"{last[0].subject}\n\n{last[0].body}" == message:
        path.unlink(missing_ok=True)  # killed after its commit (the same message before it is another write's)
        return None
    put = [rel for rel, digest in files.items() if _digest(read_or_none(paths[rel])) == digest]
    committed = git.in_head(put)
    for relpath in set(put).difference(committed):
        paths[relpath].unlink(missing_ok=True)
    for relpath, data in zip(committed, git.read_all([("HEAD", rel) for rel in committed]), strict=True):
        if data is not None:  # git could not give it: the file stays as the write left it, never emptied
            atomic_write(paths[relpath], data)
    git.unstage(*files)  # what its `git add` staged
    targets = set(paths.values())
    for folder in {full.parent for full in targets}:
        with suppress(FileNotFoundError), os.scandir(folder) as entries:
            for entry in entries:  # the temp files of its bulk write (files.temp_name: PREFIX + name + .random)
                if (
                    entry.name.startswith(TEMP_PREFIX)
                    and folder / entry.name[len(TEMP_PREFIX) :].rsplit(".", 1)[0] in targets
                ):
                    os.unlink(entry.path)
    path.unlink(missing_ok=True)
    subject = message.split("\n", 1)[0]
    return (
        f"undid the write a killed memfile left unfinished ({subject}): {len(put)} files are back as git has "
        "them; run it again",
        list(files),
    )


def _digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()
