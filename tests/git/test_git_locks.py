"""git's lock files (issue 39, item 18): a lock a killed git left never stops memfile's writes, and one a
running git holds makes a write wait and then answer "busy", on every face (CLI, HTTP API, doctor).

The locks are made by real git commands: a person's `git commit -a` holds `.git/index.lock` while its
editor runs (the editor here waits), and SIGKILL of its process group leaves the lock behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import fails, git, in_vault, ok, wait_until, write
from helpers.serve import Setup, make_setup, start_server

from memfile import Vault

MIND = "michael"


class HandCommit:
    """A person's `git commit -a` in the vault, its editor still open: git holds `.git/index.lock`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        notes = write(root / "notes.txt", "kept by hand\n")
        git(root, "add", "notes.txt")
        git(root, "-c", "user.name=p", "-c", "user.email=p@example.invalid", "commit", "-q", "-m", "notes")
        notes.write_text("kept by hand, changed\n", encoding="utf-8")
        env = os.environ | {"GIT_EDITOR": "sleep 60; true"}
        self.process = subprocess.Popen(
            ["git", "-c", "user.name=p", "-c", "user.email=p@example.invalid", "commit", "-a", "-q"],
            cwd=root,
            env=env,
            start_new_session=True,  # git and its editor: one process group, killed together
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert wait_until(lambda: (root / ".git" / "index.lock").exists(), timeout=30)

    def kill(self) -> None:
        """SIGKILL git and its editor, as a crash does: the lock stays."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def quick(root: Path) -> None:
    """memfile.toml's lock_timeout (how long a write waits for a running git): 1 s."""
    config = root / "memfile.toml"
    config.write_text("lock_timeout = 1\n" + config.read_text(encoding="utf-8"), encoding="utf-8")


@pytest.fixture
def hand_commit(tmp_path: Path) -> Iterator[HandCommit]:
    root = tmp_path / "vault"
    Vault.init(root, MIND).close()
    quick(root)
    git(root, "-c", "user.name=p", "-c", "user.email=p@example.invalid", "commit", "-q", "-am", "lock_timeout")
    held = HandCommit(root)
    try:
        yield held
    finally:
        if held.process.poll() is None:
            held.kill()


def test_cli_store_waits_for_a_running_git_then_removes_the_lock_it_left(hand_commit: HandCommit) -> None:
    root = hand_commit.root
    busy = fails(in_vault(root, "store", "fact", "office", "Berlin"), 4)
    assert f"process {hand_commit.process.pid}" in busy.stderr and ".git/index.lock" in busy.stderr
    assert "try again in a moment" in busy.stderr
    assert not (root / MIND / "fact" / "office.md").exists()
    findings = json.loads(ok(in_vault(root, "doctor", "--json")).stdout)["findings"]
    held = [f for f in findings if f["kind"] == "git_lock"]
    assert [f["path"] for f in held] == [".git/index.lock"] and not held[0]["problem"]
    assert str(hand_commit.process.pid) in held[0]["message"]

    hand_commit.kill()
    assert (root / ".git" / "index.lock").exists()
    doctor = fails(in_vault(root, "doctor"), 5)  # a lock just left is named at once, not after ten minutes
    assert "stale_lock" in doctor.stdout or ".git/index.lock" in doctor.stdout
    stored = ok(in_vault(root, "store", "fact", "office", "Berlin"))
    assert "removed .git/index.lock, left by a git command that was killed" in stored.stderr
    assert not (root / ".git" / "index.lock").exists()
    assert git(root, "log", "-1", "--format=%s").strip() == "store fact/office (user)"
    assert git(root, "status", "--porcelain").strip() == "M notes.txt"  # the person's change, kept


def test_doctor_fix_removes_a_lock_a_killed_git_left_at_once(hand_commit: HandCommit) -> None:
    root = hand_commit.root
    hand_commit.kill()
    fixed = ok(in_vault(root, "doctor", "--fix"))
    assert "removed .git/index.lock left over from a git command that was killed" in fixed.stdout
    assert not (root / ".git" / "index.lock").exists()


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    made = make_setup(tmp_path)
    quick(made.root)
    git(made.root, "-c", "user.name=p", "-c", "user.email=p@example.invalid", "commit", "-q", "-am", "lock_timeout")
    return made


def test_http_store_answers_503_while_git_runs_and_stores_after_a_crash_left_its_lock(setup: Setup) -> None:
    """`memfile serve` killed while git held its lock, restarted: writes go on (no 500 GitError)."""
    held = HandCommit(setup.root)
    server = start_server(setup)
    try:
        memory = {"category": "fact", "key": "office", "content": "Berlin"}
        busy = server.request("POST", "/memory", setup.tokens["michael"], memory)
        assert busy.status == 503 and busy.error == "Busy", busy.body
        assert busy.headers["retry-after"] and ".git/index.lock" in busy.json()["message"]
        server.process.kill()
        server.process.wait()
        held.kill()  # the crash takes git with it: its lock stays
        assert (setup.root / ".git" / "index.lock").exists()
        server = start_server(setup)
        stored = server.request("POST", "/memory", setup.tokens["michael"], memory)
        assert stored.status in (200, 201), stored.body
        assert not (setup.root / ".git" / "index.lock").exists()
        assert git(setup.root, "log", "-1", "--format=%s").strip().startswith("store fact/office")
    finally:
        if held.process.poll() is None:
            held.kill()
        server.stop()


def test_a_lock_git_meets_in_its_way_is_busy_not_a_git_failure(tmp_path: Path) -> None:
    """A git started between the writer's look for locks and its own git holds the lock: exit 4 and HTTP
    503 with Retry-After (the same call succeeds once it is done), not 500 GitError."""
    from memfile.errors import Busy, GitBusy, GitError
    from memfile.git.store import _failed
    from memfile.server.errors import status_of

    met = _failed("git add", tmp_path, f"fatal: Unable to create '{tmp_path}/.git/index.lock': File exists.")
    assert isinstance(met, GitBusy) and isinstance(met, Busy) and isinstance(met, GitError)
    assert met.exit_code == 4 and status_of(met) == 503
    assert "nothing was written: try again in a moment" in str(met) and "memfile doctor" not in str(met)
