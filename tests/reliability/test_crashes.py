"""Crashes (issue 8): a storing process is killed with SIGKILL at random moments, nothing is lost.

One vault lives through every kill. A worker process stores, updates, forgets and verifies memories
of a small key pool through `Vault.open(...)` in a loop, writing one JSON line before each operation
(`try`) and one after it returned (`ok`) or raised (`err`); half the time the next worker first
retries the store the killed one was doing. Workers are forked by one `sys.executable -c FORK_SERVER`
process that imported memfile, GitPython and Whoosh once (200 interpreter start-ups would cost a
minute of CPU); each is its own process group, which its git children join. The test kills the
worker with SIGKILL at a moment chosen (seeded, the seed is printed; MEMFILE_CRASH_SEED=N replays
one) in one of these ways:

- `delay`: a random delay after the worker starts (anywhere in a store: file write, git, index);
- `git_lock`: when `.git/index.lock` appears (git add or git commit runs), plus 0-3 ms;
- `git_commit`: when `.git/COMMIT_EDITMSG` is rewritten (git commit has started), plus 0-6 ms;
- `git_ref`: when `.git/HEAD.lock` appears (git commit is moving the branch), plus 0-1 ms;
- `index_commit`: when the Whoosh index's files change (an index commit is written), plus 0-4 ms;
- `worker_only`: a random delay, killing the worker but not its git child, which finishes alone (a
  worker's git is started from its commit thread, so it is not made to die with it: files.dying_with_parent).

All but `worker_only` kill the worker's whole process group: a crash takes its git child with it.
Each kill must find the worker running (killed by the SIGKILL, not dead on its own).

After every kill, whatever the moment:

- every `.md` file parses (no partial memory) and lies where its front-matter says;
- each key holds the version of its last reported operation, or the result of the operation in
  flight when the kill came (so every store that reported success is there, unless a later operation
  replaced it); a failed operation changed nothing;
- `Vault.memories()` lists exactly the memory files on disk (no temp file read as a memory), with no
  issues, and the full-text index agrees: each memory's unique word finds it and only it, words of
  replaced versions find nothing;
- a `.git/index.lock` left by a killed git is removed by the next store (no git runs in the vault), which
  says so and commits.

Every 25 kills, after any kill that left a git lock, and at the end: temp files and git locks are aged
by an hour (doctor --fix removes temp files older than a minute, and a git lock no running git holds,
whatever its age); doctor then finds nothing stale and no problem but temp files, uncommitted changes and
the index.lock (if there is one); `doctor --fix` then leaves no problem, no temp file, no git lock
(`next-index-PID.lock` aside), a clean `git status` and every memory as it was; `git fsck` passes; the
next store commits. What `doctor --fix` leaves is recorded with what it does to the next store,
repaired by hand so that the run goes on, and fails the test at the end.

At the end every reported store is in history: each reported commit is an ancestor of HEAD and holds
the reported content, and each reported content is a version of its key in `Vault.history`.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from helpers import git

from memfile import GitError, Vault, fileformat
from memfile.files import TEMP_PREFIX

MIND = "michael"
#: The keys the workers write: updates and re-creations of the same files, not only new ones.
POOL = [("fact", f"k_{i:02d}") for i in range(12)] + [("note", f"n_{i:02d}") for i in range(4)]
#: Keys only the test itself stores (to prove the vault is usable after a crash and doctor --fix).
PROBE = ("note", "probe")
LOCK_PROBE = ("note", "lock_probe")
FULL_CHECK_EVERY = 25
MODES = ("delay", "git_lock", "git_commit", "git_ref", "index_commit", "worker_only")
WEIGHTS = (25, 15, 20, 10, 15, 15)
POLL_TIMEOUT_S = 3.0

FORK_SERVER = r"""
import json, os, random, sys, traceback
from memfile import NotFound, Vault
import git, whoosh.index, memfile.index.persisted, memfile.index  # loaded once: each worker is a fork of this process


def work(root, pool, order):
    events = os.open(order["events"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def say(**event):  # one write per line: a kill cuts at most the last line
        os.write(events, (json.dumps(event, separators=(",", ":")) + "\n").encode("utf-8"))

    rng, wid = random.Random(order["seed"]), order["worker"]
    for seq in range(1000):
        if seq == 0 and order.get("retry"):
            op = order["retry"]  # the store the last killed worker was doing, again (as a caller retries it)
        else:
            cat, key = rng.choice(pool)
            roll = rng.random()
            kind = "store" if roll < 0.75 else "forget" if roll < 0.88 else "verify"
            op = {"op": kind, "cat": cat, "key": key}
            if kind == "store":
                op["source"] = "agent" if rng.random() < 0.25 else "user"
                op["content"] = f"{cat} {key} version of worker {wid} step {seq}: mark{wid}x{seq}z"
        say(ev="try", **op)
        try:
            with Vault.open(root, "michael") as vault:
                ref = f"{op['cat']}/{op['key']}"
                if op["op"] == "store":
                    result = vault.store(op["cat"], op["key"], op["content"], source=op["source"])
                    say(ev="ok", commit=result.commit, changed=result.changed)
                elif op["op"] == "forget":
                    vault.forget(ref)
                    say(ev="ok")
                else:
                    result = vault.verify(ref)
                    say(ev="ok", commit=result.commit, changed=result.changed)
        except NotFound as exc:
            say(ev="err", kind="NotFound", msg=str(exc)[:300])
        except Exception as exc:
            say(ev="err", kind=type(exc).__name__, msg=str(exc)[:2000])
    say(ev="done")


root, pool = sys.argv[1], [tuple(k) for k in json.loads(sys.argv[2])]
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    command = json.loads(line)
    if command["do"] == "go":
        pid = os.fork()
        if pid == 0:  # the worker: its own process group (its git children join it), killed by the test
            code = 1
            try:
                os.setpgid(0, 0)
                os.dup2(os.open(command["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
                work(root, pool, command)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        try:
            os.setpgid(pid, pid)  # also here, so the group exists before the test hears the pid
        except OSError:
            pass  # the worker has set it already
        print(json.dumps({"pid": pid}), flush=True)
    else:
        _, status = os.waitpid(command["pid"], 0)
        print(json.dumps({"signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None}), flush=True)
"""


# --- processes ------------------------------------------------------------------------------


def group_processes(pgid: int) -> list[tuple[int, str]]:
    """(pid, command name) of the live (not zombie) processes of process group `pgid`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()  # state, ppid, pgrp, session, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append((int(name), comm))
    return found


def git_subcommands(pgid: int) -> list[str]:
    """The subcommands (add, commit, ...) of the git processes running in process group `pgid`."""
    commands = []
    for pid, comm in group_processes(pgid):
        if comm != "git":
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = [a.decode("utf-8", "replace") for a in handle.read().split(b"\0") if a]
        except OSError:
            continue
        words = [a for a in argv[1:] if not a.startswith("-") and "=" not in a]
        commands.append(words[0] if words else "?")
    return commands


class ForkServer:
    """`sys.executable -c FORK_SERVER`: imports memfile once, then forks one worker process per kill."""

    def __init__(self, root: Path, logs: Path) -> None:
        self.logs = logs
        self.worker: Worker | None = None  # the one running now
        with open(logs / "server.err", "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", FORK_SERVER, str(root), json.dumps(POOL)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        assert self._ask(None) == {"ready": True}, self.stderr()

    def _ask(self, command: dict[str, Any] | None) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if command is not None:
            self.proc.stdin.write(json.dumps(command).encode("utf-8") + b"\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, self.stderr()
        return json.loads(line)

    def start(self, number: int, order: dict[str, Any]) -> Worker:
        self.worker = Worker(number, self.logs)
        self.worker.pid = self._ask(
            {
                "do": "go",
                **order,
                "events": str(self.worker.events_path),
                "stderr": str(self.worker.log),
                "worker": number,
            }
        )["pid"]
        return self.worker

    def reap(self, worker: Worker) -> int | None:
        """Wait for the worker's end; the signal that ended it (None: it exited)."""
        self.worker = None
        return self._ask({"do": "reap", "pid": worker.pid})["signal"]

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0, self.stderr()

    def abort(self) -> None:
        """After a failure: kill the running worker's group and the server."""
        if self.worker is not None:
            try:
                os.killpg(self.worker.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stderr(self) -> str:
        return (self.logs / "server.err").read_text(encoding="utf-8", errors="replace")[-3000:]


class Worker:
    """One forked worker: its pid (= its process group), its events file and its stderr."""

    def __init__(self, number: int, logs: Path) -> None:
        self.number = number
        self.pid = 0
        self.events_path = logs / f"worker{number}.jsonl"
        self.log = logs / f"worker{number}.err"

    def events(self) -> list[dict[str, Any]]:
        """Every complete line the worker wrote (read after it is dead)."""
        lines = self.events_path.read_bytes().split(b"\n") if self.events_path.exists() else [b""]
        return [json.loads(line) for line in lines[:-1] if line.strip()]  # [:-1]: a cut-off last line

    def stderr(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-3000:] if self.log.exists() else ""


# --- what the vault may hold ----------------------------------------------------------------


@dataclass
class Ledger:
    """Per key, the contents the vault may hold now (None: no file); what workers reported; counts."""

    possible: dict[tuple[str, str], set[str | None]] = field(default_factory=dict)
    reported: list[dict[str, Any]] = field(default_factory=list)  # stores that returned (content, commit)
    attempted: list[str] = field(default_factory=list)  # the unique word of every content a store tried
    counts: Counter[str] = field(default_factory=Counter)
    before_in_flight: set[str | None] | None = None  # what the key of the op in flight could hold before it

    def __post_init__(self) -> None:
        for key in [*POOL, PROBE, LOCK_PROBE]:
            self.possible[key] = {None}

    def record(self, events: list[dict[str, Any]], worker: Worker) -> dict[str, Any] | None:
        """Apply one worker's events; returns the operation in flight when it was killed, if any."""
        pending: dict[str, Any] | None = None
        for event in events:
            if event["ev"] == "try":
                assert pending is None, event
                pending = event
                if event["op"] == "store":
                    self.attempted.append(mark(event["content"]))
            elif event["ev"] == "ok":
                assert pending is not None, event
                key = (pending["cat"], pending["key"])
                self.counts[f"ok {pending['op']}"] += 1
                if pending.get("retry"):
                    self.counts["retry committed it" if event["commit"] else "retry found it committed"] += 1
                if pending["op"] == "store":
                    self.possible[key] = {pending["content"]}
                    self.reported.append({**pending, "commit": event["commit"], "worker": worker.number})
                elif pending["op"] == "forget":
                    self.possible[key] = {None}
                pending = None
            elif event["ev"] == "err":
                assert pending is not None, event
                # Only a forget or verify of a key not on disk may fail: nothing else goes wrong here.
                assert event["kind"] == "NotFound" and pending["op"] != "store", (pending, event, worker.stderr())
                self.counts["failed (NotFound)"] += 1
                pending = None
            else:
                raise AssertionError(f"worker {worker.number} finished its loop before it was killed: {event}")
        self.before_in_flight = None
        if pending is not None:
            key = (pending["cat"], pending["key"])
            self.before_in_flight = set(self.possible[key])
            self.counts[f"in flight {pending['op']}"] += 1
            if pending["op"] == "store":
                self.possible[key].add(pending["content"])
            elif pending["op"] == "forget":
                self.possible[key].add(None)
        return pending


def mark(content: str) -> str:
    return content.rsplit(" ", 1)[-1]


def read_files(root: Path) -> tuple[dict[tuple[str, str], tuple[str, str]], list[Path]]:
    """(category, key) -> (path, content) of every memory file, parsed (so none is partial); the temp files."""
    memories: dict[tuple[str, str], tuple[str, str]] = {}
    temps = []
    now = datetime.now(timezone.utc)
    for folder, _, files in os.walk(root / MIND):
        for name in files:
            path = Path(folder) / name
            relpath = path.relative_to(root).as_posix()
            if name.startswith(TEMP_PREFIX):
                temps.append(path)
                continue
            if name == ".gitkeep":
                continue
            assert name.endswith(".md"), relpath
            memory = fileformat.parse(path.read_bytes(), relpath, now)  # FileParseError: a partial file
            assert relpath == f"{MIND}/{memory.category}/{memory.key}.md", (relpath, memory.ref)
            memories[(str(memory.category), memory.key)] = (relpath, memory.content)
    return memories, temps


def _bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def git_locks(root: Path) -> list[str]:
    """The lock files in .git (index.lock, HEAD.lock, refs/heads/main.lock, ...), not looking among the objects."""
    git_dir, found = root / ".git", []
    for folder, dirs, files in os.walk(git_dir):
        if Path(folder) == git_dir / "objects":
            dirs[:] = [d for d in dirs if len(d) != 2]  # the loose objects' fan-out folders hold no locks
        found += [(Path(folder) / name).relative_to(git_dir).as_posix() for name in files if name.endswith(".lock")]
    return sorted(found)


def _poll(sign: Any, nth: int, deadline: float) -> bool:
    """Look every ~0.1 ms until `sign()` has turned true `nth` times (False: the deadline came first)."""
    was, times = False, 0
    while time.monotonic() < deadline:
        now = sign()
        if now and not was:
            times += 1
            if times == nth:
                return True
        was = now
        time.sleep(0.0001)  # leaves the CPU to the worker and its git (the windows watched last 1-10 ms)
    return False


def changes(read: Any) -> Any:
    """A sign that is true when `read()` differs from its value at the poll before."""
    last = [read()]

    def sign() -> bool:
        now = read()
        moved, last[0] = now != last[0], now
        return moved

    return sign


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


def _names(folder: Path) -> frozenset[str]:
    """The Whoosh index's file names (each index commit adds a segment's files and a new TOC)."""
    try:
        return frozenset(n for n in os.listdir(folder) if "memories_v" in n)
    except FileNotFoundError:
        return frozenset()


# --- the test -------------------------------------------------------------------------------


class CrashRun:
    def __init__(self, root: Path, logs: Path, rng: random.Random) -> None:
        self.root, self.logs, self.rng = root, logs, rng
        self.ledger = Ledger()
        self.kills = 0
        self.probes = 0
        self.stats: Counter[str] = Counter()
        self.git_at_kill: Counter[str] = Counter()
        self.left_locks: Counter[str] = Counter()
        self.in_git = 0  # kills that left a git lock: they landed inside a git command
        self.next_index_locks: set[str] = set()  # harmless leftovers of `git commit -- PATHS` (pid in the name)
        self.full_checks = 0
        self.seconds: Counter[str] = Counter()
        self.landed: Counter[str] = Counter()  # how far the operation in flight got before its kill
        self.temps_seen: set[Path] = set()  # temp files left by interrupted writes
        self.lock_probe_notices: list[str] = []
        self.findings: list[str] = []  # what doctor --fix could not repair (reported together at the end)

    # --- killing ---

    def kill(self, worker: Worker, mode: str) -> None:
        """Let the worker run, then SIGKILL it at a moment chosen by `mode`; return once its group is gone."""
        pid = worker.pid
        git_dir = self.root / ".git"
        index_dir = self.root / ".memfile" / "index" / MIND
        deadline = time.monotonic() + POLL_TIMEOUT_S
        if mode in ("delay", "worker_only"):
            time.sleep(self.rng.uniform(0.0, 0.2))
            hit, extra = True, 0.0
        else:
            # The k-th time the sign shows, plus a few random milliseconds (the sign is a start; this spreads
            # the kills over what follows it). Each store runs git add and git commit (index.lock twice), one
            # commit (COMMIT_EDITMSG rewritten, then HEAD.lock while the branch moves) and one index commit.
            if mode == "git_lock":
                sign, nth, extra = (lambda: (git_dir / "index.lock").exists()), self.rng.randint(1, 4), 0.003
            elif mode == "git_commit":
                sign, nth, extra = changes(lambda: _mtime(git_dir / "COMMIT_EDITMSG")), self.rng.randint(1, 3), 0.006
            elif mode == "git_ref":
                sign, nth, extra = (lambda: (git_dir / "HEAD.lock").exists()), self.rng.randint(1, 3), 0.001
            else:
                assert mode == "index_commit", mode
                sign, nth, extra = changes(lambda: _names(index_dir)), self.rng.randint(1, 4), 0.004
            hit = _poll(sign, nth, deadline)
            extra = self.rng.uniform(0.0, extra)
        if extra:
            time.sleep(extra)
        self.stats[mode if hit else f"{mode} (poll timed out)"] += 1
        if mode in ("delay", "worker_only"):  # what was running (a /proc scan, ~1 ms before the kill)
            running = git_subcommands(pid)
            self.git_at_kill[f"git {', '.join(running)}" if running else "no git process"] += 1
        if mode == "worker_only":
            os.kill(pid, signal.SIGKILL)
        else:
            os.killpg(pid, signal.SIGKILL)
        # It was running until the kill: a worker that died on its own would hide every finding.
        assert self.server.reap(worker) == signal.SIGKILL, worker.stderr()
        deadline = time.monotonic() + 30
        while group_processes(pid):  # a git child outliving a worker-only kill finishes on its own
            assert time.monotonic() < deadline, group_processes(pid)
            time.sleep(0.005)
        self.kills += 1

    # --- checking ---

    def check_after_kill(self, in_flight: dict[str, Any] | None) -> None:
        """Files, index and ledger agree; a left git lock is handled (see module docstring)."""
        ledger, root = self.ledger, self.root
        files, temps = read_files(root)
        if in_flight is not None and in_flight["op"] != "verify":  # how far it got (for the counts)
            key = (in_flight["cat"], in_flight["key"])
            result = in_flight.get("content")
            held = files[key][1] if key in files else None
            if held != result or result in (ledger.before_in_flight or set()):
                self.landed["not on disk (or no change)"] += 1
            elif git(root, "status", "--porcelain", "--", f"{MIND}/{key[0]}/{key[1]}.md"):
                self.landed["on disk, not committed"] += 1
            else:
                self.landed["on disk and committed, never reported"] += 1
        for key, possible in ledger.possible.items():
            held = files[key][1] if key in files else None
            assert held in possible, f"{key[0]}/{key[1]} holds {held!r}, expected one of {possible!r}"
            ledger.possible[key] = {held}
        assert set(files) <= set(ledger.possible), set(files) - set(ledger.possible)
        self.temps_seen.update(temps)
        with Vault.open(root, MIND) as vault:
            memories = vault.memories()
            assert vault.issues == []
            assert sorted((m.path, m.content) for m in memories) == sorted(files.values())
            # One search for all the memories' unique words finds each memory once, as it is on disk.
            current = [mark(content) for _, content in files.values()]
            hits = vault.search(" ".join(current), limit=len(current) + 10) if current else []
            assert sorted((h.memory.path, h.memory.content) for h in hits) == sorted(files.values()), hits
            # The words of versions replaced or never written find nothing (no stale document).
            replaced = [word for word in ledger.attempted if word not in set(current)]
            sample = self.rng.sample(replaced, min(10, len(replaced)))
            assert not sample or vault.search(" ".join(sample)) == [], sample
        locks = git_locks(root)
        landed_in_git = False
        for lock in locks:
            if lock.startswith("next-index-"):
                landed_in_git |= lock not in self.next_index_locks
                self.next_index_locks.add(lock)
            else:
                landed_in_git = True
                self.left_locks[lock] += 1
        self.in_git += landed_in_git
        if "index.lock" in locks:
            self.probe_left_lock()
        if self.kills % FULL_CHECK_EVERY == 0 or any(not lock.startswith("next-index-") for lock in locks):
            self.full_check()

    def probe_left_lock(self) -> None:
        """A store meeting the lock a killed git left removes it (no git runs in the vault), says so and commits."""
        content = f"note lock_probe after kill {self.kills}: lockprobe{self.kills}z"
        with Vault.open(self.root, MIND) as vault:
            result = vault.store(*LOCK_PROBE, content)
        removed = [n for n in result.notices if n.startswith("removed ") and ".git/index.lock" in n]
        assert removed and result.commit, result.notices
        self.lock_probe_notices.append(removed[0])
        assert not (self.root / ".git" / "index.lock").exists()
        self.probe_stored(content, result.commit)

    def probe_stored(self, content: str, commit: str | None) -> None:
        """The ledger learns a probe store the test made itself."""
        self.ledger.possible[LOCK_PROBE] = {content}
        self.ledger.reported.append(
            dict(op="store", cat=LOCK_PROBE[0], key=LOCK_PROBE[1], content=content, commit=commit, worker=None)
        )

    def full_check(self) -> None:
        """doctor, doctor --fix, doctor again: clean; nothing changed; git sound; the next store commits."""
        clock = time.monotonic()
        try:
            self._full_check()
        finally:
            self.seconds["of which full checks"] += time.monotonic() - clock

    def _full_check(self) -> None:
        self.full_checks += 1
        root = self.root
        files, temps = read_files(root)
        # doctor --fix removes temp files older than a minute (and git locks no running git holds). Age them
        # all by an hour, so that age is no reason to leave one.
        old = time.time() - 3600
        for path in [*temps, *(root / ".git" / lock for lock in git_locks(root))]:
            os.utime(path, (old, old))
        with Vault.open(root, MIND) as vault:
            vault.memories()  # a read brings the index in line (a lock probe's failed store put its file back)
            report = vault.doctor()
            assert "stale_index" not in {f.kind for f in report.findings}, report.findings
            found = {f.kind for f in report.problems}
            assert found <= {"temp_file", "uncommitted", "stale_lock"}, found
            assert ("stale_lock" in found) == bool(git_locks(root)), found  # every git lock, aged above
            status = git(root, "status", "--short")  # what doctor --fix started from (shown in a finding)
            vault.doctor(fix=True)
            left = git_locks(root)
            after = vault.doctor()
            if left or after.problems:
                # A finding (the test fails at the end): say what it does, repair it by hand, go on.
                effect = ""
                if left:
                    content = f"note lock_probe after doctor fix, kill {self.kills}: fixprobe{self.kills}z"
                    try:
                        result = vault.store(*LOCK_PROBE, content)
                    except GitError as exc:
                        effect = f"; the next store fails: {str(exc).splitlines()[0]}"
                    else:
                        effect = "; the next store still commits"
                        self.probe_stored(content, result.commit)
                self.findings.append(
                    f"kill {self.kills}: doctor --fix left git locks {left}, problems "
                    f"{[(f.kind, f.path) for f in after.problems]}, git status {git(root, 'status', '--short')!r} "
                    f"(before doctor --fix {status!r})"
                    f"{effect}"
                )
                for lock in left:
                    (root / ".git" / lock).unlink()
                if git(root, "status", "--porcelain", "--", MIND):
                    git(root, "add", "--all", "--", MIND)
                    git(
                        root,
                        "-c",
                        "user.name=Test",
                        "-c",
                        "user.email=test@example.com",
                        "commit",
                        "-q",
                        "-m",
                        "the test repairs what doctor --fix left",
                        "--",
                        MIND,
                    )
                vault.doctor(fix=True)
                after = vault.doctor()
            assert after.problems == [], after.problems
            assert git(root, "status", "--porcelain") == ""
            files_after, temps_after = read_files(root)
            assert temps_after == []
            if LOCK_PROBE in files_after:
                files[LOCK_PROBE] = files_after[LOCK_PROBE]
            assert files_after == files  # doctor --fix changed no memory
            assert [lock for lock in git_locks(root) if not lock.startswith("next-index-")] == []
            fsck = subprocess.run(
                ["git", "fsck", "--no-progress", "--no-dangling"], cwd=root, capture_output=True, text=True
            )
            assert fsck.returncode == 0, fsck.stdout + fsck.stderr
            self.probes += 1
            content = f"note probe after {self.kills} kills: probe{self.probes}z"
            result = vault.store(*PROBE, content)
            assert result.commit, result
        self.ledger.possible[PROBE] = {content}
        self.ledger.reported.append(
            {
                "op": "store",
                "cat": PROBE[0],
                "key": PROBE[1],
                "content": content,
                "commit": result.commit,
                "worker": None,
            }
        )

    def check_history(self) -> int:
        """Every reported store is in history; returns how many versions were checked."""
        root, checked = self.root, 0
        ancestors = set(git(root, "rev-list", "HEAD").split())
        with Vault.open(root, MIND) as vault:
            for cat, key in {(s["cat"], s["key"]) for s in self.ledger.reported}:
                versions = vault.history(f"{cat}/{key}")
                by_sha = {v.sha: v for v in versions}
                contents = {v.memory.content for v in versions if v.memory is not None}
                assert all(v.problem is None for v in versions), [v.problem for v in versions if v.problem]
                for stored in (s for s in self.ledger.reported if (s["cat"], s["key"]) == (cat, key)):
                    assert stored["content"] in contents, f"lost from history: {stored}"
                    if stored["commit"]:
                        assert stored["commit"] in ancestors, stored
                        memory = by_sha[stored["commit"]].memory
                        assert memory is not None and memory.content == stored["content"], stored
                    checked += 1
        return checked

    # --- the loop ---

    def run(self, kills: int, modes: list[str] | None = None) -> None:
        started = time.monotonic()
        self.server = ForkServer(self.root, self.logs)
        retry = None
        try:
            for n in range(kills):
                mode = modes[n % len(modes)] if modes else self.rng.choices(MODES, WEIGHTS)[0]
                clock = time.monotonic()
                worker = self.server.start(n, {"seed": self.rng.randrange(2**32), "retry": retry})
                self.kill(worker, mode)
                events = worker.events()
                self.seconds["running until the kill"] += time.monotonic() - clock
                # One line per kill (shown when the test fails): what the worker did, what was in flight.
                print(
                    f"kill {n + 1} ({mode}): "
                    + " ".join(e.get("op") or e.get("kind") or e["ev"] for e in events if e["ev"] != "ok"),
                    f"locks: {git_locks(self.root)}",
                )
                in_flight = self.ledger.record(events, worker)
                retry = None
                if in_flight and in_flight["op"] == "store" and self.rng.random() < 0.5:
                    retry = {name: in_flight[name] for name in ("op", "cat", "key", "source", "content")}
                    retry["retry"] = True
                clock = time.monotonic()
                self.check_after_kill(in_flight)
                self.seconds["checking"] += time.monotonic() - clock
        except BaseException:
            self.server.abort()
            raise
        self.server.stop()
        if self.kills % FULL_CHECK_EVERY:
            self.full_check()
        checked = self.check_history()
        elapsed = time.monotonic() - started
        counts = self.ledger.counts
        print(f"{self.kills} kills in {elapsed:.1f} s; modes: {dict(self.stats)}")
        print(f"the change in flight at each kill (forget, store): {dict(self.landed)}")
        print(f"seconds: { {name: round(t, 1) for name, t in self.seconds.items()} }")
        print(f"what ran at delay/worker-only kills: {dict(self.git_at_kill)}")
        print(
            f"kills inside a git command (a lock left): {self.in_git}; temp files left: {len(self.temps_seen)}; "
            f"git locks left by kills: {dict(self.left_locks)} and {len(self.next_index_locks)} next-index-PID.lock; "
            f"lock probes: {len(self.lock_probe_notices)} "
            f"({self.lock_probe_notices[0] if self.lock_probe_notices else '-'})"
        )
        print(
            f"operations: {dict(counts)}; stores reported: {len(self.ledger.reported)}; "
            f"versions checked in history: {checked}; full checks: {self.full_checks}; "
            f"commits: {git(self.root, 'rev-list', '--count', 'HEAD').strip()}"
        )
        assert self.kills == kills
        assert checked == len(self.ledger.reported)
        assert not self.findings, "doctor --fix did not bring the vault back:\n" + "\n".join(self.findings)


def crash_run(tmp_path: Path, kills: int, modes: list[str] | None = None) -> None:
    seed = int(os.environ.get("MEMFILE_CRASH_SEED") or random.randrange(2**32))
    print(f"MEMFILE_CRASH_SEED={seed}")
    vault = Vault.init(tmp_path / "v", MIND)
    root = vault.root
    vault.close()
    logs = tmp_path / "logs"
    logs.mkdir()
    CrashRun(root, logs, random.Random(seed)).run(kills, modes)


@pytest.mark.slow
def test_200_kills_lose_nothing(tmp_path: Path) -> None:
    crash_run(tmp_path, 200)


def test_12_kills_lose_nothing(tmp_path: Path) -> None:
    crash_run(tmp_path, 12, modes=list(MODES))
