"""A write of many files (an import): its temp files made with one mtime and read back (`swap.prepare`),
and `git add` staging them in its own process while this one builds the index
(`GitStore.commit(meanwhile=...)`).

Real files, real git: every file has the mtime the read-back assumed, and a refusal while the files are
written leaves no temp file behind.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from memfile import swap
from memfile.errors import GitError
from memfile.files import TEMP_PREFIX
from memfile.git.store import GitStore


def _changes(folder: Path, n: int = 40) -> list[tuple[str, Path, bytes | None]]:
    return [
        (f"m/{kind}/k{i}.md", folder / "m" / kind / f"k{i}.md", f"memory {i}\n".encode() * (i + 1))
        for i, kind in ((i, ("fact", "note")[i % 2]) for i in range(n))
    ]


def _temps(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.name.startswith(TEMP_PREFIX))


def test_a_refusal_while_the_files_are_written_leaves_no_temp_file(tmp_path: Path) -> None:
    def refuse() -> None:
        raise ValueError("record 7: refused")

    with pytest.raises(ValueError, match="record 7"):
        swap.prepare(_changes(tmp_path), 1_700_000_000_000_000_000, refuse)
    assert _temps(tmp_path) == []


def test_put_all_reads_back_each_new_file_with_the_mtime_it_keeps(tmp_path: Path) -> None:
    changes = _changes(tmp_path, 20)
    before, read_back = swap.put_all(changes, {}, lambda data, relpath, mtime: (relpath, mtime))
    assert before == [None] * 20 and _temps(tmp_path) == []
    for relpath, path, data in changes:
        kept, mtime_ns, checked = read_back[relpath]
        assert path.read_bytes() == kept == data and checked == (relpath, mtime_ns)
        assert path.stat().st_mtime_ns == mtime_ns


# --- git add in its own process while this one works ---------------------------------------------


def _store(tmp_path: Path) -> GitStore:
    git = GitStore(tmp_path, "memfile test", "test@memfile.invalid")
    git.init()
    return git


def _committed(root: Path) -> list[str]:
    out = subprocess.run(["git", "ls-tree", "-r", "--name-only", "HEAD"], cwd=root, capture_output=True, text=True)
    return out.stdout.split()


def test_a_commit_runs_meanwhile_once_while_git_stages_the_files(tmp_path: Path) -> None:
    git = _store(tmp_path)
    changes = _changes(tmp_path, 20)
    swap.put_all(changes, {}, lambda *_: None)
    ran: list[int] = []
    sha = git.commit([relpath for relpath, _, _ in changes], "import 20", meanwhile=lambda: ran.append(1))
    assert ran == [1] and sha == git.head()
    assert _committed(tmp_path) == sorted(relpath for relpath, _, _ in changes)


def test_a_commit_with_nothing_to_stage_still_runs_meanwhile(tmp_path: Path) -> None:
    git = _store(tmp_path)
    ran: list[int] = []
    assert git.commit(["m/fact/gone.md"], "nothing", meanwhile=lambda: ran.append(1)) is None
    assert ran == [1]


def test_meanwhile_raising_waits_for_git_and_commits_nothing(tmp_path: Path) -> None:
    git = _store(tmp_path)
    changes = _changes(tmp_path, 20)
    swap.put_all(changes, {}, lambda *_: None)

    def fail() -> None:
        raise RuntimeError("the index build failed")

    with pytest.raises(RuntimeError, match="index build failed"):
        git.commit([relpath for relpath, _, _ in changes], "import 20", meanwhile=fail)
    assert not (tmp_path / ".git" / "index.lock").exists()  # git was waited for: its lock is gone
    assert _committed(tmp_path) == []


def test_a_failed_git_add_beside_work_names_git_s_reason(tmp_path: Path) -> None:
    git = _store(tmp_path)
    changes = _changes(tmp_path, 20)
    swap.put_all(changes, {}, lambda *_: None)
    (tmp_path / ".git" / "index.lock").write_text("held by another git")
    ran: list[int] = []
    with pytest.raises(GitError, match="git add failed.*index.lock"):
        git.commit([relpath for relpath, _, _ in changes], "import 20", meanwhile=lambda: ran.append(1))
    assert ran == [1]


@pytest.mark.parametrize("forks", [True, False], ids=["index-beside-git-add", "commit-in-a-thread"])
def test_an_import_whose_index_build_fails_is_still_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: bool
) -> None:
    """The files are written and valid: the index (a cache) failing must not leave them staged but uncommitted.

    Either way the write goes, git commits them, the import answers with a notice (a disk full while
    the index is written), and the next read brings the index in line.
    """
    from helpers import commit_count, git

    from memfile import Vault
    from memfile.index import Index

    vault = Vault.init(tmp_path / "v", "michael", "Michael's Mind")
    records = [{"category": "fact", "key": f"k{i}", "content": f"memory {i}"} for i in range(30)]
    refresh = Index.refresh

    def failing(self: Index, *args: object, **kwargs: object) -> object:
        if kwargs.get("known"):
            raise OSError(28, "No space left on device")
        return refresh(self, *args, **kwargs)

    monkeypatch.setattr(Index, "refresh", failing)
    if not forks:
        monkeypatch.setattr("memfile.writer.may_fork", lambda: False)
    before = commit_count(vault.root)
    report = vault.import_(json.dumps(records).encode(), format="synapse")
    assert len(report.created) == 30 and report.commit is not None
    assert any("the index could not be written: the disk is full" in notice for notice in vault.notices)
    assert report.notices == vault.notices  # the report alone (HTTP, --json) says it too
    assert commit_count(vault.root) == before + 1
    assert git(vault.root, "status", "--porcelain") == ""
    monkeypatch.setattr(Index, "refresh", refresh)
    assert len(vault.memories()) == 30
