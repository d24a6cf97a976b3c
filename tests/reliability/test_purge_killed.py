"""A purge killed with SIGKILL at random moments (20 rounds, seeded) leaves the vault as it was before or,
once the next write ran (`memfile doctor --fix`), as after the purge: never half. Either way `git fsck`
passes and every other memory, with every version of it, is kept."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import git, leaks

from memfile import Vault
from memfile.purge import TOMBSTONE

SECRET = "Alice lives at 12 Quiet Lane, flat 3"
SECRET_2 = "Alice moved to 40 Harbour Road"
ROUNDS = 20


def purge_process(root: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "memfile", "--vault", str(root), "purge", "identity/alice_address", "--yes"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def snapshot(root: Path) -> tuple[str, dict[str, bytes], set[str]]:
    """The refs, the memory files, and every object the refs reach."""
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in (root / "michael").rglob("*.md")}
    reached = set(git(root, "rev-list", "--all", "--objects").split())
    return git(root, "for-each-ref"), files, reached


def blobs_outside(root: Path, path: str) -> set[str]:
    """The blob of every version of every file but `path`, in every ref's history."""
    out = git(root, "log", "--all", "--format=", "--raw", "--no-abbrev", "--no-renames")
    rows = [line.split("\t") for line in out.splitlines() if line.startswith(":")]
    return {row[0].split()[3] for row in rows if row[1] != path and row[0].split()[3] != "0" * 40}


@pytest.mark.slow
def test_a_killed_purge_leaves_the_vault_before_or_after_never_half(tmp_path: Path) -> None:
    template = tmp_path / "template"
    vault = Vault.init(template, "michael", "Michael's Mind")
    for n in range(20):
        vault.store("fact", f"fact_{n}", f"Fact number {n} about the office")
    vault.store("identity", "alice_address", SECRET)
    vault.store("fact", "editor", "Uses neovim")
    vault.store("identity", "alice_address", SECRET_2)
    vault.recall(query="Alice")
    before_refs, before_files, before_objects = snapshot(template)
    others = {path: data for path, data in before_files.items() if "alice" not in path}
    other_blobs = blobs_outside(template, "michael/identity/alice_address.md")
    timing = tmp_path / "timing"
    shutil.copytree(template, timing, symlinks=True)
    started = time.monotonic()
    assert purge_process(timing).wait() == 0
    took = time.monotonic() - started

    seed = int(os.environ.get("MEMFILE_CRASH_SEED", "41"))
    chance = random.Random(seed)
    outcomes = []
    for n in range(ROUNDS):
        root = tmp_path / f"round{n}"
        shutil.copytree(template, root, symlinks=True)
        process = purge_process(root)
        time.sleep(chance.uniform(0.0, took))
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        fixed = subprocess.run(
            [sys.executable, "-m", "memfile", "--vault", str(root), "doctor", "--fix"], capture_output=True, text=True
        )
        assert fixed.returncode in (0, 5), (seed, n, fixed.stderr)
        assert subprocess.run(["git", "fsck", "--full"], cwd=root, capture_output=True).returncode == 0, (seed, n)
        refs, files, reached = snapshot(root)
        assert not (root / ".git" / "MEMFILE_PURGE").exists()
        assert other_blobs <= reached, (seed, n)  # every version of every other file, still reachable
        assert {p: d for p, d in files.items() if "alice" not in p} == others, (seed, n)
        if (root / TOMBSTONE).exists():
            record = [json.loads(line) for line in (root / TOMBSTONE).read_text().splitlines()]
            assert [r["ref"] for r in record] == ["identity/alice_address"], (seed, n)
            assert leaks(root, SECRET) == [] and leaks(root, SECRET_2) == [], (seed, n)
            outcomes.append("after")
        else:
            assert refs == before_refs and files == before_files and reached == before_objects, (seed, n)
            outcomes.append("before")
    print(f"seed {seed}: purge took {took:.2f} s; outcomes {outcomes}")
