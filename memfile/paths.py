"""Where memories live: (mind, category, key) <-> paths, and what is ignored.

Every path built from user or agent input is built here, and refused when it
would leave its mind folder (`..`, absolute paths, symlinks pointing outside).
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from .errors import GitError, InvalidInput
from .model import Category, validate_key

MIND_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
MIND_RULE = "lowercase letters, digits, _ and -, starting with a letter or digit, at most 64 characters"

#: Folders at the vault root that are never minds.
RESERVED_DIRS = frozenset({".git", ".memfile"})

_EDITOR_TEMP = re.compile(
    r"(^\.)|(~$)|(^#.*#$)|(\.sw[a-p]$)|(___jb_(tmp|old)___$)|(^4913$)|(\.tmp$)|(\.bak$)|(\.orig$)"
)


def validate_mind(name: object) -> str:
    if not isinstance(name, str) or not MIND_PATTERN.fullmatch(name):
        raise InvalidInput("mind", name, MIND_RULE)
    return name


def is_ignored_name(name: str) -> bool:
    """Dot-files, dot-folders and editor temp/backup files are never memories."""
    return bool(_EDITOR_TEMP.search(name))


def is_memory_name(name: str) -> bool:
    """A memory file's name: `*.md`, not hidden (editor temp names end otherwise or start with a dot)."""
    return name.endswith(".md") and not name.startswith(".")


def memory_relpath(mind: str, category: Category, key: str) -> PurePosixPath:
    """The canonical vault-relative path of a memory: `<mind>/<category>/<key>.md`."""
    return PurePosixPath(validate_mind(mind), str(category), validate_key(key) + ".md")


def is_inside(path: Path, folder: Path) -> bool:
    """True when `path`, with symlinks resolved, lies inside `folder` (resolved)."""
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def safe_path(root: Path, relpath: PurePosixPath | str, mind: str) -> Path:
    """An absolute path for `relpath` that is guaranteed to stay in the mind folder.

    Raises InvalidInput when the relative path is absolute, climbs with `..`,
    or resolves (through a symlink) outside `root/mind`.
    """
    full = _lexically_inside(root, relpath, mind)
    if not is_inside(full, root / mind):
        raise InvalidInput("path", str(relpath), f"a path inside the mind folder {mind}/ (a symlink leads outside)")
    return full


def safe_paths(root: Path, relpaths: list[str], mind: str) -> list[Path]:
    """`safe_path` of each of many paths (a write of many files), each folder resolved once: only a
    symlink is resolved again.

    They are paths to write: none may lie in a git repository of its own inside the mind (a folder
    holding `.git`), where `git add` of the vault silently stages nothing and a version would be lost.

    Raises:
        InvalidInput: as `safe_path`, for the first path that fails.
        GitError: a path lies in such a repository.
    """
    inside: set[Path] = set()  # folders found inside the mind, with symlinks resolved
    tracked: set[Path] = set()  # folders of the mind the vault's git tracks (no `.git` down to them)
    paths = []
    for relpath in relpaths:
        full = _lexically_inside(root, relpath, mind)
        if full.parent not in tracked:
            _tracked(root, mind, full.parent, relpath, tracked)
        if full.parent not in inside or os.path.islink(full):
            full = safe_path(root, relpath, mind)
            if not os.path.islink(full):  # resolved through its folder: the folder leads inside
                inside.add(full.parent)
        paths.append(full)
    return paths


def _tracked(root: Path, mind: str, folder: Path, relpath: PurePosixPath | str, tracked: set[Path]) -> None:
    """Raise GitError when `folder` or a folder above it, up to the mind folder, is a git repository of its own."""
    for level in (folder, *folder.parents):
        if level in tracked:
            return
        if os.path.lexists(level / ".git"):
            own = level.relative_to(root).as_posix()
            raise GitError(
                f"{own}/ is a git repository of its own (it holds .git): the vault's git cannot keep versions "
                f"of the files in it, so memfile does not write {relpath}; move that folder out of the mind, "
                f"or remove {own}/.git"
            )
        tracked.add(level)
        if level == root / mind:
            return


def _lexically_inside(root: Path, relpath: PurePosixPath | str, mind: str) -> Path:
    rel = PurePosixPath(str(relpath).replace("\\", "/"))
    if rel.is_absolute() or ".." in rel.parts or not rel.parts or rel.parts[0] != mind:
        raise InvalidInput("path", str(relpath), f"a path inside the mind folder {mind}/")
    return root / Path(*rel.parts)


def mind_dirs(root: Path) -> list[str]:
    """The mind folders of a vault: top-level, non-hidden folders."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    return [
        e.name
        for e in entries
        if e.is_dir(follow_symlinks=False) and not e.name.startswith(".") and e.name not in RESERVED_DIRS
    ]


def shown_path(text: str) -> str:
    """A path as it can be printed: bytes of a file name that is not UTF-8 become U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def is_utf8_name(name: str) -> bool:
    """False for a file name that is not UTF-8 (Python holds its bytes as surrogates): never a memory's."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_walked(relpath: str) -> bool:
    """Whether the index's walk of a mind (`index.source.stat_walk`) gives this path of a file under it (a
    path git's tree lists, `<mind>/...`): a `.md` file not hidden, with a UTF-8 name, in no hidden or
    ignored folder."""
    *folders, name = relpath.split("/")
    return (
        len(folders) >= 1
        and name[-3:] == ".md"
        and name[0] != "."
        and is_utf8_name(name)
        and not any(f[:1] == "." or is_ignored_name(f) for f in folders[1:])
    )
