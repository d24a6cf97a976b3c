"""Vaults built once a module and copied for each test: the same files, the same git history, none of
the stores and commits that made them run again.

A template is built in a module fixture by the same Vault calls a test's own fixture made; each test
then gets `copied(template, tmp_path / name)`, a folder of its own that it may change as it likes. The
copy takes everything (work tree, `.git`, `.memfile`'s records) but the index, a cache the copy
builds on its first read, as after a clone: an index copied from another folder would describe
files of other inodes. A module fixture runs outside conftest's per-test environment, so a template
is built inside `isolated_env`, with the same blanks (no git identity, no memfile variables).

(Not a test module: pytest collects no test here.)
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

#: The variables conftest's `_isolated_env` removes for every test (and `isolated_env` here).
BLANKED = (
    "MEMFILE_VAULT",
    "MEMFILE_MIND",
    "MEMFILE_SOURCE",
    "MEMFILE_KEYS",
    "MEMFILE_NO_SERVER",
    "XDG_CONFIG_HOME",
    "EDITOR",
    "VISUAL",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "EMAIL",
)


@contextmanager
def isolated_env(home: Path) -> Iterator[None]:
    """The environment a test runs in (conftest's `_isolated_env`), for a module fixture's work."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        patch.setenv("GIT_CONFIG_GLOBAL", str(home / "no-gitconfig"))
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        for name in BLANKED:
            patch.delenv(name, raising=False)
        yield


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """A template: `build(root)` run once, in a test's environment, on a new folder `root`."""
    base = factory.mktemp(name)
    with isolated_env(base / "home"):
        build(base / name)
    return base / name


def copied(template: Path, target: Path) -> Path:
    """A copy of a template vault at `target` (which must not exist), without its index."""

    def the_index(folder: str, names: list[str]) -> list[str]:
        return ["index"] if Path(folder) == template / ".memfile" else []

    shutil.copytree(template, target, symlinks=True, ignore=the_index)
    return target
