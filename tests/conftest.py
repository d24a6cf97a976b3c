"""Shared fixtures: real vaults in tmp_path, and no trace of the machine's git identity."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from shared_vaults import BLANKED

from memfile import Vault

REPO = Path(__file__).resolve().parent.parent
SAMPLE_VAULT = REPO / "sample_vault"


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blank global git config and memfile variables: CI has no git identity, so neither do tests."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "no-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in BLANKED:  # MEMFILE_KEYS: never the machine's own; MEMFILE_NO_SERVER: the fast path is tested
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def sample_copy(tmp_path: Path) -> Path:
    """A copy of sample_vault/ (no git repository yet), with a fixed mtime for the hand-made file."""
    target = tmp_path / "sample"
    shutil.copytree(SAMPLE_VAULT, target)
    import os

    os.utime(target / "michael" / "note" / "reading-list.md", (1_780_000_000, 1_780_000_000))  # 2026-05-28
    return target


@pytest.fixture
def vault(tmp_path: Path) -> Vault:
    """A fresh vault with one mind, `michael`, created by `Vault.init`."""
    return Vault.init(tmp_path / "vault", "michael", "Michael's Mind")


@pytest.fixture
def two(tmp_path: Path) -> tuple[Vault, Vault]:
    """Laptop and server: two clones of one vault, synced through a bare remote."""
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    laptop = Vault.init(tmp_path / "laptop", "michael", "Michael's Mind")
    laptop.store("fact", "office", "The office is in Berlin", tags=["work"])
    laptop.add_remote(str(bare))
    laptop.sync()
    subprocess.run(["git", "clone", "-q", str(bare), str(tmp_path / "server")], check=True, capture_output=True)
    server = Vault.open(tmp_path / "server", "michael")
    return laptop, server


def git(root: Path, *args: str) -> str:
    """Run git in a vault and return its stdout (for assertions on history)."""
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def commit_count(root: Path) -> int:
    return int(git(root, "rev-list", "--count", "HEAD").strip())
