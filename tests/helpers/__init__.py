"""Helpers shared by the test modules: drive the CLI, assert outcomes, make files and commits by hand, run git,
wait for a condition. Fixtures are in tests/conftest.py; what only some units share is in this package's
modules (`serve`, `fastpath`, `mcp`, `console`, `browser`, `vaults`).

pyproject.toml puts tests/ on sys.path (`pythonpath`), so every test module imports `helpers` by that name.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memfile.cli import main

#: tests/, and the checkout it is in.
TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
SAMPLE_VAULT = REPO / "sample_vault"
GOLDEN = TESTS / "golden"

#: How long a test waits for a server, a process or a watcher by default. Generous: the machine is
#: shared, and a first request opens a mind's index.
DEADLINE = 60.0

#: Synapse's memory fields (seed 000), which every export record and every `--format json` object carries.
SYNAPSE_FIELDS = (
    "id",
    "category",
    "key",
    "content",
    "tags",
    "priority",
    "source",
    "verified",
    "confidence",
    "expires_at",
    "mind_id",
    "created_at",
    "updated_at",
)
#: A hand-made memory file with unknown keys, comments and Markdown that must survive rewrites.
HAND_MADE = textwrap.dedent(
    """\
    ---
    id: mem_handmade0001
    category: fact
    key: office_hours
    priority: normal
    tags: [office]
    source: user
    verified: true
    confidence: 1.0
    expires_at: null
    created_at: 2020-01-01T08:00:00Z
    updated_at: 2020-01-02T08:00:00Z
    aliases: [hours, opening]   # an inline comment
    # a comment kept by memfile
    links:
      - "https://example.com/hours"
    ---
    Office hours:

    *   Monday  –  Friday, 9–17
    *   closed on **holidays**
    """
)

#: A memory file whose YAML breaks on line 4.
BROKEN = "---\nid: mem_broken0001\ncategory: fact\nkey: a: b\n---\nbody\n"


def git(root: Path, *args: str) -> str:
    """Run git in a vault and return its stdout (for assertions on history)."""
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def commit_count(root: Path) -> int:
    return int(git(root, "rev-list", "--count", "HEAD").strip())


def wait_until(predicate: Callable[[], Any], timeout: float = DEADLINE, every: float = 0.05) -> Any:
    """Poll `predicate` until it returns something true, and return that; once `timeout` seconds passed,
    return its last (false) value. Never a bare sleep: `assert wait_until(lambda: ..., 5)`."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    return predicate()


def run(*args: object, input: str | None = None, env: dict[str, str | None] | None = None) -> Result:
    """`memfile ARGS` through click's CliRunner (stdout and stderr kept apart)."""
    return CliRunner().invoke(main, [str(a) for a in args], input=input, env=env)


def in_vault(root: Path, *args: object, **kwargs) -> Result:
    return run("--vault", str(root), *args, **kwargs)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result


def fails(result: Result, code: int) -> Result:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def commit_by_hand(root: Path, *paths: str, message: str = "by hand") -> None:
    """Commit as a person would, with an identity given on the command line."""
    git(root, "add", "--", *paths)
    git(root, "-c", "user.name=Hand", "-c", "user.email=hand@example.com", "commit", "-q", "-m", message)


@contextmanager
def committed_on(day: str) -> Iterator[None]:
    """The commits made inside are dated `day` at noon UTC (author and committer): a vault with a past, for
    recall and search as of a date."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):
            patch.setenv(name, f"{day}T12:00:00Z")
        yield


def last_subject(root: Path) -> str:
    return git(root, "log", "-1", "--format=%s").strip()


def plain_vault(root: Path, config: str = "", **minds: dict[str, str]) -> Path:
    """A vault folder made by hand: memfile.toml plus minds holding `category/key -> content` files."""
    write(root / "memfile.toml", config)
    for mind, files in minds.items():
        (root / mind).mkdir(parents=True, exist_ok=True)
        for ref, content in files.items():
            write(root / mind / f"{ref}.md", content + "\n")
    return root


def files_outside_git(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts and ".memfile" not in p.relative_to(root).parts
    }


@contextmanager
def another_thread_running() -> Iterator[None]:
    """A second thread waits meanwhile: this process may not fork (as in the MCP server or the watcher)."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextmanager
def worker_held(minds: Any, caller: Any) -> Iterator[threading.Event]:
    """A served vault's worker (`memfile.worker.Minds`) kept busy by a call of `caller` (a commit being
    made, say) until the event given is set: every call made meanwhile queues up behind it."""
    release, busy = threading.Event(), threading.Event()

    def occupy(vault: Any) -> None:
        busy.set()
        release.wait(30)

    blocker = threading.Thread(target=minds.call_sync, args=(caller, occupy))
    blocker.start()
    assert busy.wait(10)
    try:
        yield release
    finally:
        release.set()
        blocker.join(30)


def read_terminal(master: int) -> bytes:
    """All a pseudo-terminal's other side wrote, until every end of it is closed; `master` is closed then."""
    out = b""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError as exc:  # EIO: every end of the terminal's other side is closed
                assert exc.errno == errno.EIO
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    return out


def index_dir(root: Path, mind: str = "michael") -> Path:
    """Where a mind's index lies: .memfile/index/MIND."""
    return root / ".memfile" / "index" / mind


@contextmanager
def hold_index_lock(root: Path, mind: str = "michael") -> Iterator[None]:
    """Another writer holds the mind's index while the block runs (Whoosh's own writer lock, taken through its
    documented API, as another process's write would), so memfile cannot write it meanwhile."""
    from whoosh import index

    from memfile.index import INDEX_NAME

    held = index.open_dir(str(index_dir(root, mind)), indexname=INDEX_NAME).writer(timeout=1.0)
    try:
        yield
    finally:
        held.cancel()


def index_of(root: Path, mind: str = "michael") -> Any:
    """The mind's index as the index package opens it (`memfile.index.Index`, apart from any Vault)."""
    from memfile.index import Index

    return Index(root, mind, 30.0, lambda notice: None)


def watcher_vouches(root: Path, mind: str = "michael") -> bool:
    """Whether a live watcher of the mind vouches that its index is in line with the files (reads then skip
    the stat diff), as the index package answers it (`memfile.index.source`, apart from any Vault)."""
    from memfile.index.source import watcher_vouches

    return watcher_vouches(root, mind)


def recorded(root: Path, mind: str = "michael") -> dict[str, Any]:
    """What the mind's index has recorded (path -> stat), read from its catalog without bringing it in line."""
    from memfile.index import Index

    index = Index(root, mind, 0.0, lambda notice: None)
    try:
        return dict(index.store.catalog.recorded())
    finally:
        index.close()


def mount_namespaces() -> bool:
    """Whether this process may make mount namespaces (root, `unshare -m`): what a read-only bind mount needs."""
    return (
        shutil.which("unshare") is not None
        and os.geteuid() == 0
        and subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0
    )


def in_private_mounts(script: str) -> subprocess.CompletedProcess[str]:
    """Run a shell script in a mount namespace of its own (its mounts vanish with it)."""
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)


def memfile_command(root: Path, *args: str) -> str:
    quoted = " ".join(f"'{a}'" for a in args)
    return f"'{sys.executable}' -m memfile --vault '{root}' {quoted}"


def leaks(root: Path, needle: str) -> list[str]:
    """Where `needle` can still be read: git's history and every object in .git (packed, loose, reachable
    or not), any file under .git or .memfile as raw bytes, and what memfile reads, exports and finds."""
    found = []
    if needle in git(root, "log", "--all", "-p", "--reflog"):
        found.append("git log --all -p")
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=root, capture_output=True, check=True
    ).stdout
    if needle.encode() in objects:
        found.append("git cat-file --batch-all-objects")
    for folder in (".git", ".memfile"):
        for path in (root / folder).rglob("*"):
            if path.is_file() and not path.is_socket() and needle.encode() in path.read_bytes():
                found.append(str(path.relative_to(root)))
    word = max(needle.split(), key=len)
    for args in (("export", "--raw"), ("search", word), ("recall", "--query", word), ("list",)):
        if needle in ok(in_vault(root, *args)).stdout:
            found.append("memfile " + " ".join(args))
    return found
