"""A killed import (issue 39, item 8): `memfile import` of thousands of memories is SIGKILLed half way, in
a real process, at three moments: while it writes the temp files (in process: no child is running then),
while `git add` stages them (git holds `.git/index.lock`), and while Whoosh's two
subwriters, forked beside `git add`, build the index (they too hold the writer lock).

No child of the killed import stays alive; the next `memfile store` succeeds promptly, says it undid the
import, and leaves the vault with none of the imported memories, nothing lost and `git status` clean; the
import run again then commits them all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import git, wait_until
from helpers.serve import server_env

from memfile import Vault

MIND = "michael"
#: Enough for every speed trick of a big write (`git add` beside the index build) and for the kill to land
#: half way.
RECORDS = 3000
#: What "promptly" means for the store after the kill on a busy shared machine (it undoes 3,000 files).
PROMPT_S = 20.0


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry.isdigit() and int(fields[1]) == pid:
            found.append(int(entry))
    return found


def forked(pid: int) -> list[int]:
    """The children of `pid` that are forks of it (not git)."""
    found = []
    for child in children(pid):
        try:
            with open(f"/proc/{child}/comm", encoding="utf-8") as comm:
                found += [] if comm.read().startswith("git") else [child]
        except OSError:
            continue
    return found


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting for its parent to reap it has ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def memfile(root: Path, home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "memfile", "--vault", str(root), "--mind", MIND, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(home),
        start_new_session=True,
    )


def temp_files(folder: Path) -> bool:
    try:
        return any(entry.name.startswith(".memfile-tmp-") for entry in os.scandir(folder))
    except FileNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["temp_files", "git_add", "index_build"])
def test_a_killed_import_leaves_no_child_and_the_next_store_undoes_it(tmp_path: Path, moment: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "vault"
    old = os.environ.get("GIT_CONFIG_GLOBAL")
    os.environ["GIT_CONFIG_GLOBAL"] = str(home / "no-gitconfig")
    try:
        Vault.init(root, MIND).close()
    finally:
        os.environ.pop("GIT_CONFIG_GLOBAL") if old is None else os.environ.update(GIT_CONFIG_GLOBAL=old)
    records = [
        {"category": "fact", "key": f"k{n:05d}", "content": f"imported fact {n} word{n}z"} for n in range(RECORDS)
    ]
    source = tmp_path / "records.json"
    source.write_text(json.dumps(records), encoding="utf-8")
    head = git(root, "rev-parse", "HEAD").strip()

    importing = memfile(root, home, "import", str(source))
    folder = root / MIND / "fact"
    # The import writes the temp files itself; once they are renamed into place, `git add` stages them.
    assert wait_until(lambda: importing.poll() is not None or temp_files(folder), timeout=120, every=0.002)
    if moment in ("git_add", "index_build"):
        lock = root / ".git" / "index.lock"
        assert wait_until(lambda: importing.poll() is not None or lock.exists() and not temp_files(folder), 120, 0.002)
    if moment == "index_build":
        assert wait_until(lambda: importing.poll() is not None or len(forked(importing.pid)) >= 2, 120, 0.002)
    assert importing.poll() is None, importing.communicate()
    left = children(importing.pid)
    assert left or moment == "temp_files", "the import runs its work in no child at this moment"
    os.kill(importing.pid, signal.SIGKILL)
    importing.communicate()
    assert wait_until(lambda: not any(alive(pid) for pid in left), timeout=2)  # they die with it, not when done

    clock = time.monotonic()
    storing = memfile(root, home, "store", "note", "probe", "after the kill")
    out, err = storing.communicate(timeout=120)
    took = time.monotonic() - clock
    assert storing.returncode == 0, (out, err)
    assert took < PROMPT_S, took
    assert f"import {RECORDS} memories from records.json" in err and "undid the write" in err, err
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(root, "rev-list", "--count", f"{head}..HEAD").strip() == "1"  # the probe's commit alone
    assert sorted(p.name for p in (root / MIND).rglob("*.md")) == ["probe.md"]

    again = memfile(root, home, "import", str(source))
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, (out, err)
    assert len(list(folder.glob("*.md"))) == RECORDS
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
