"""The worker of a resident process (`memfile.worker.Minds`): one thread owns every Vault call of every
mind, minds open on first use, each call acts for its `Caller`, and one in-process watcher follows the
opened minds' files with one inotify instance."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import git, plain_vault, wait_until, watcher_vouches, worker_held, write

from memfile import Vault, worker
from memfile.config import AmbiguousMind
from memfile.errors import InvalidInput, NotAVault, NotFound, Refused
from memfile.files import lock_holder
from memfile.model import Source
from memfile.watch import MindBatch
from memfile.worker import Caller, Minds

ALICE = Caller("alice", Source.AGENT, "bot-alice")
ALICE_PERSON = Caller("alice", Source.USER, "michael-laptop")
BOB = Caller("bob", Source.AGENT, "bot-bob")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A vault of three minds made by `Vault.init` (git repository, identity from memfile.toml)."""
    for mind in ("alice", "bob", "carol"):
        Vault.init(tmp_path / "vault", mind).close()
    return tmp_path / "vault"


@pytest.fixture
def minds(root: Path) -> Iterator[Minds]:
    running = Minds(root)
    try:
        yield running
    finally:
        running.close()


class Spy:
    """Records, for some Vault methods, the thread and the mind of each call (the real method still runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
        self.calls: list[tuple[str, str, int]] = []  # (method, mind, thread id)
        for name in names:
            monkeypatch.setattr(Vault, name, self._wrap(name, getattr(Vault, name)))

    def _wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        spy = self

        def recorded(vault: Vault, *args: Any, **kwargs: Any) -> Any:
            spy.calls.append((name, getattr(vault, "mind", args[1] if len(args) > 1 else "?"), threading.get_ident()))
            return method(vault, *args, **kwargs)

        return recorded

    def threads(self) -> set[int]:
        return {thread for _, _, thread in self.calls}

    def methods(self) -> set[str]:
        return {name for name, _, _ in self.calls}


def marker(root: Path, mind: str) -> Path:
    return root / ".memfile" / f"watch-{mind}.clean"


# --- one thread, minds opened lazily -------------------------------------------------------------------


def test_every_vault_call_runs_on_one_thread_across_minds_watching_and_warming(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(monkeypatch, "__init__", "search", "store", "refresh", "warm", "close")
    minds = Minds(root)
    seen: list[int] = []
    try:
        for caller in (ALICE, BOB, ALICE_PERSON):
            minds.call_sync(caller, lambda v: v.store("fact", "wifi", f"zebra42 for {v.mind}"))
            seen.append(minds.call_sync(caller, lambda v: threading.get_ident()))

        async def many() -> list[Any]:  # calls from an event loop, several at once
            return await asyncio.gather(*(minds.call(c, lambda v: v.search("zebra42")) for c in (ALICE, BOB) * 5))

        assert all(len(hits) == 1 for hits in asyncio.run(many()))
        assert minds.watcher is not None and minds.watcher.wait_idle("bob", 10)
        before = minds.watcher.applied("bob")
        write(root / "bob" / "note" / "hand.md", "okapi by hand\n")  # a watcher batch, refreshed by the worker
        assert wait_until(lambda: minds.watcher.applied("bob") > before, 10)
        assert wait_until(lambda: "warm" in spy.methods(), 10)  # idle between calls: the index is warmed
    finally:
        minds.close()
    assert {"__init__", "search", "store", "refresh", "warm", "close"} <= spy.methods()
    assert len(set(seen)) == 1 and spy.threads() == set(seen)
    assert threading.get_ident() not in seen
    assert {mind for _, mind, _ in spy.calls} == {"alice", "bob"}


def test_minds_open_on_their_first_call_only(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy(monkeypatch, "__init__")
    minds = Minds(root)
    try:
        assert minds.mind_names() == ["alice", "bob", "carol"]
        assert spy.calls == []  # nothing opened by Minds itself, nor by listing the minds
        minds.call_sync(ALICE, lambda v: v.list())
        minds.call_sync(ALICE_PERSON, lambda v: v.list())
        assert [mind for _, mind, _ in spy.calls] == ["alice"]  # once, for both callers
        assert lock_holder(root / ".memfile" / "watch-alice.lock") == os.getpid()
        for mind in ("bob", "carol"):  # never asked for: no Vault, no watch, no lock
            assert lock_holder(root / ".memfile" / f"watch-{mind}.lock") is None
            assert not minds.watcher.watching(mind)
    finally:
        minds.close()


def test_a_mind_that_does_not_exist_is_not_found_and_a_bad_name_is_refused(minds: Minds, root: Path) -> None:
    with pytest.raises(NotFound, match="nowhere"):
        minds.call_sync(Caller("nowhere", Source.AGENT), lambda v: v.list())
    with pytest.raises(InvalidInput):
        minds.call_sync(Caller("../alice", Source.AGENT), lambda v: v.list())
    with pytest.raises(InvalidInput):  # never the default mind
        minds.call_sync(Caller("", Source.USER), lambda v: v.list())
    assert not (root / "nowhere").exists()
    assert minds.call_sync(ALICE, lambda v: v.mind) == "alice"  # the worker goes on after a refusal


def test_the_default_mind_follows_the_cli_rules(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Minds(root, watch=False) as minds:
        assert minds.default_mind() == "alice"  # memfile.toml's default_mind, set by the first init
        monkeypatch.setenv("MEMFILE_MIND", "bob")
        assert minds.default_mind() == "bob"
    monkeypatch.delenv("MEMFILE_MIND")
    two = plain_vault(tmp_path / "two", a={"fact/x": "x"}, b={"fact/y": "y"})
    with Minds(two, watch=False) as minds, pytest.raises(AmbiguousMind):
        minds.default_mind()
    with pytest.raises(NotAVault):
        Minds(tmp_path / "not-a-vault")


def test_exceptions_propagate_and_the_worker_goes_on(minds: Minds) -> None:
    def broken(vault: Vault) -> None:
        raise KeyError("a bug in the caller's function")

    with pytest.raises(KeyError):
        minds.call_sync(ALICE, broken)
    with pytest.raises(KeyError):
        asyncio.run(minds.call(ALICE, broken))
    assert minds.call_sync(ALICE, lambda v: v.mind) == "alice"


# --- acting as the caller ---------------------------------------------------------------------


def test_each_call_acts_for_its_caller_and_nothing_leaks_to_the_next(minds: Minds, root: Path) -> None:
    stored = minds.call_sync(ALICE, lambda v: v.store("fact", "wifi", "zebra42"))
    assert stored.memory.source == Source.AGENT
    with pytest.raises(Refused):  # an agent cannot verify
        minds.call_sync(ALICE, lambda v: v.verify("fact/wifi"))
    assert minds.call_sync(ALICE_PERSON, lambda v: v.actor) == Source.USER
    verified = minds.call_sync(ALICE_PERSON, lambda v: v.verify("fact/wifi"))  # a person can
    assert verified.memory.verified
    assert "Memfile-Key: michael-laptop" in git(root, "log", "-1", "--format=%B")
    assert minds.call_sync(ALICE, lambda v: v.actor) == Source.AGENT  # the person's call left nothing behind
    with pytest.raises(Refused):  # nor does a call that failed
        minds.call_sync(ALICE, lambda v: v.forget("fact/wifi"))
    assert minds.call_sync(ALICE_PERSON, lambda v: v.actor) == Source.USER
    minds.call_sync(ALICE, lambda v: v.store("fact", "door", "blue"))
    body = git(root, "log", "-1", "--format=%B")
    assert "Memfile-Key: bot-alice" in body and "michael-laptop" not in body


def test_concurrent_callers_each_act_as_themselves(minds: Minds, root: Path) -> None:
    async def main() -> list[tuple[str, Source]]:
        def probe(vault: Vault) -> tuple[str, Source]:
            time.sleep(0.001)
            return vault.mind, vault.actor

        callers = [ALICE, ALICE_PERSON, BOB] * 10
        return await asyncio.gather(*(minds.call(caller, probe) for caller in callers))

    answers = asyncio.run(main())
    assert answers == [(c.mind, c.source) for c in [ALICE, ALICE_PERSON, BOB] * 10]


# --- the watcher --------------------------------------------------------------------------------


def test_a_hand_edit_is_seen_by_the_next_call_through_the_watcher(minds: Minds, root: Path) -> None:
    (root / "alice" / "fact").mkdir(exist_ok=True)  # the edit below is a file's events only
    minds.call_sync(ALICE, lambda v: v.list())
    assert minds.watcher is not None and minds.watcher.wait_idle("alice", 10)
    assert marker(root, "alice").exists()
    before = minds.watcher.applied("alice")
    write(root / "alice" / "fact" / "wifi.md", "zebra42 by hand\n")
    assert wait_until(lambda: minds.watcher.applied("alice") > before, 10)
    assert minds.watcher.wait_idle("alice", 10) and marker(root, "alice").exists()

    def look(vault: Vault) -> tuple[bool, list[str]]:
        return watcher_vouches(vault.root, vault.mind), [hit.memory.key for hit in vault.search("zebra42")]

    assert minds.call_sync(ALICE, look) == (True, ["wifi"])  # vouched for: no stat diff, and yet seen


def test_a_second_watcher_on_a_mind_the_server_watches_exits_4(minds: Minds, root: Path) -> None:
    minds.call_sync(BOB, lambda v: v.list())
    watcher = subprocess.run(
        [sys.executable, "-m", "memfile", "--vault", str(root), "--mind", "bob", "watch"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert watcher.returncode == 4, watcher.stderr
    assert "already watches" in watcher.stderr and "Traceback" not in watcher.stderr


def test_beside_a_memfile_watch_the_server_does_not_watch_and_still_sees_hand_edits(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker, "WATCH_AGAIN", 0.0)  # each call tries again to watch
    process = subprocess.Popen(
        [sys.executable, "-m", "memfile", "--vault", str(root), "--mind", "alice", "watch"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    lock = root / ".memfile" / "watch-alice.lock"
    minds = Minds(root)
    try:
        assert wait_until(lambda: lock_holder(lock) == process.pid, 30)
        assert minds.call_sync(ALICE, lambda v: v.list()) == []
        assert minds.watcher is not None and not minds.watcher.watching("alice")
        write(root / "alice" / "fact" / "wifi.md", "zebra42 by hand\n")
        found = lambda: minds.call_sync(ALICE, lambda v: [hit.memory.key for hit in v.search("zebra42")])  # noqa: E731
        assert wait_until(lambda: found() == ["wifi"], 15)
        assert lock_holder(lock) == process.pid  # the watch was left alone
        assert wait_until(lambda: marker(root, "alice").exists(), 30)  # it is past its start, signals handled
        process.terminate()
        assert process.wait(30) == 0
        minds.call_sync(ALICE, lambda v: v.list())  # the next call finds the mind unwatched: the server takes it
        assert minds.watcher.watching("alice") and lock_holder(lock) == os.getpid()
    finally:
        minds.close()
        if process.poll() is None:
            process.terminate()
            process.wait(30)


def inotify_instances() -> int:
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            found += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
        except OSError:
            pass  # closed meanwhile
    return found


@pytest.mark.slow
def test_a_thousand_opened_minds_use_one_inotify_instance(tmp_path: Path) -> None:
    root = plain_vault(
        tmp_path / "vault", **{f"chat{n:04d}": {"fact/topic": f"chat {n} talks of okapi{n}"} for n in range(1000)}
    )
    before = inotify_instances()  # another file's test in this worker process may keep a watch still open
    minds = Minds(root)
    try:
        for n in range(1000):
            minds.call_sync(Caller(f"chat{n:04d}", Source.AGENT), lambda v: None)
        assert inotify_instances() - before <= 1
        assert all(minds.watcher.watching(f"chat{n:04d}") for n in (0, 499, 999))
        write(root / "chat0500" / "fact" / "hand.md", "wapiti by hand\n")  # one mind among a thousand
        caller = Caller("chat0500", Source.AGENT)
        seen = lambda: minds.call_sync(caller, lambda v: [hit.memory.key for hit in v.search("wapiti")])  # noqa: E731
        assert wait_until(lambda: seen() == ["hand"], 60)
        # one watch over the vault, not a watcher per mind: a handful of threads, watches far below the limit
        assert threading.active_count() < 20, [t.name for t in threading.enumerate()]
        assert wait_until(lambda: all(minds.watcher.wait_idle(f"chat{n:04d}", 0) for n in range(1000)), 120)
        watches, folders = inotify_watches(), sum(1 for _ in os.walk(root))
        assert watches <= folders + 10 and watches < 0.2 * int(
            Path("/proc/sys/fs/inotify/max_user_watches").read_text()
        )
        last = Caller("chat0999", Source.AGENT)
        assert minds.call_sync(last, lambda v: (watcher_vouches(v.root, v.mind), v.search("gnu"))) == (True, [])
        write(root / "chat0999" / "fact" / "late.md", "gnu by hand\n")  # the 1,000th mind opened
        found = lambda: minds.call_sync(last, lambda v: [hit.memory.key for hit in v.search("gnu")])  # noqa: E731
        assert wait_until(lambda: found() == ["late"], 60)
    finally:
        minds.close()


def inotify_watches() -> int:
    """The inotify watches of this process (one line per watch in the fdinfo of its inotify instances)."""
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify":
                with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as info:
                    found += sum(line.startswith("inotify wd:") for line in info)
        except OSError:
            pass  # closed meanwhile
    return found


class Refreshed:
    """Records each Vault.refresh of the watcher (the real method still runs): (mind, paths)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, list[str] | None]] = []
        real = Vault.refresh

        def recorded(vault: Vault, *args: Any, **kwargs: Any) -> Any:
            self.calls.append((vault.mind, kwargs.get("paths")))
            return real(vault, *args, **kwargs)

        monkeypatch.setattr(Vault, "refresh", recorded)

    def of(self, mind: str) -> list[list[str] | None]:
        return [paths for m, paths in self.calls if m == mind]


def test_an_edit_refreshes_its_own_mind_only_and_the_servers_churn_refreshes_nothing(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for mind in ("alice", "bob"):  # the edits below are files' events only (a new folder means a full diff)
        for category in ("fact", "note"):
            (root / mind / category).mkdir(exist_ok=True)
    refreshed = Refreshed(monkeypatch)
    minds = Minds(root)
    try:
        for caller in (ALICE, BOB):
            minds.call_sync(caller, lambda v: v.list())
        assert minds.watcher is not None
        for mind in ("alice", "bob"):  # their first batch, the full diff, is done: the next ones name their paths
            assert wait_until(lambda m=mind: minds.watcher.applied(m) >= 1 and minds.watcher.wait_idle(m, 0.1), 10)
        for caller in (ALICE, BOB):
            minds.call_sync(caller, lambda v: v.store("fact", "wifi", f"zebra42 for {v.mind}"))  # commits, index writes
        for mind in ("alice", "bob"):  # events come in order: once this is applied, the stores' were heard
            write(root / mind / "note" / "ready.md", "ready\n")
            assert wait_until(
                lambda m=mind: any(f"{m}/note/ready.md" in (paths or []) for paths in refreshed.of(m)), 10
            )
            assert minds.watcher.wait_idle(mind, 10)
        alice, bob = len(refreshed.of("alice")), len(refreshed.of("bob"))

        write(root / "alice" / "note" / "hand.md", "okapi by hand\n")
        assert wait_until(lambda: ["alice/note/hand.md"] in refreshed.of("alice")[alice:], 10)
        minds.call_sync(ALICE_PERSON, lambda v: v.store("fact", "door", "blue"))  # the server's own churn
        git(root, "gc", "-q")  # and git's
        write(root / ".memfile" / "scratch" / "x", "an index write")
        write(root / "carol" / "note" / "unopened.md", "a mind nobody opened\n")
        # one watch, its events in order: once bob's edit is refreshed, everything above was heard
        write(root / "bob" / "note" / "sentinel.md", "wapiti\n")
        assert wait_until(lambda: ["bob/note/sentinel.md"] in refreshed.of("bob"), 10)
        assert minds.watcher.wait_idle("bob", 10)
        assert refreshed.of("bob")[bob:] == [["bob/note/sentinel.md"]]  # nothing of alice's, git's or the index's
        assert "carol" not in {mind for mind, _ in refreshed.calls} and not minds.watcher.watching("carol")
        assert all(
            paths is not None and all(p.startswith("alice/") for p in paths) for paths in refreshed.of("alice")[alice:]
        )
        assert minds.call_sync(BOB, lambda v: [hit.memory.key for hit in v.search("wapiti")]) == ["sentinel"]
    finally:
        minds.close()


def test_a_mind_made_while_serving_is_watched_from_its_first_call(minds: Minds, root: Path) -> None:
    minds.call_sync(ALICE, lambda v: v.list())  # the watch over the vault is running
    assert minds.watcher is not None and minds.watcher.wait_idle("alice", 10)
    result = subprocess.run(
        [sys.executable, "-m", "memfile", "init", str(root), "--mind", "dave"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    dave = Caller("dave", Source.AGENT)
    assert minds.call_sync(dave, lambda v: v.list()) == []
    assert minds.watcher.watching("dave") and minds.watcher.wait_idle("dave", 10)
    write(root / "dave" / "fact" / "wifi.md", "zebra42 by hand\n")
    assert wait_until(
        lambda: minds.call_sync(dave, lambda v: [h.memory.key for h in v.search("zebra42")]) == ["wifi"], 10
    )
    assert minds.watcher.wait_idle("dave", 10)
    assert minds.call_sync(dave, lambda v: watcher_vouches(v.root, v.mind))


def test_stop_lets_calls_in_flight_finish_and_takes_every_marker_away(root: Path) -> None:
    minds = Minds(root)
    for caller in (ALICE, BOB):
        minds.call_sync(caller, lambda v: v.list())
    assert minds.watcher is not None and minds.watcher.wait_idle("alice", 10) and minds.watcher.wait_idle("bob", 10)
    assert marker(root, "alice").exists() and marker(root, "bob").exists()
    started, answers = threading.Event(), []

    def slow_store(vault: Vault) -> str:
        started.set()
        time.sleep(0.3)
        return vault.store("fact", "late", "stored across the stop").memory.key

    caller = threading.Thread(target=lambda: answers.append(minds.call_sync(ALICE, slow_store)))
    caller.start()
    assert started.wait(10)
    minds.stop()
    caller.join(10)
    assert answers == ["late"] and (root / "alice" / "fact" / "late.md").exists()
    for mind in ("alice", "bob"):  # no command may trust a watcher that is gone
        assert not marker(root, mind).exists()
        assert lock_holder(root / ".memfile" / f"watch-{mind}.lock") is None
        with Vault.open(root, mind) as reader:
            assert not watcher_vouches(reader.root, reader.mind)
    with pytest.raises(RuntimeError, match="closed"):
        minds.call_sync(ALICE, lambda v: v.list())
    minds.stop()
    minds.close()  # both harmless afterwards; close ends the thread holding the Vaults stop left open
    assert wait_until(
        lambda: not any(t.name.startswith(("memfile-worker", "memfile-vaults")) for t in threading.enumerate()), 10
    )


def test_close_stops_every_thread_and_frees_every_lock(root: Path) -> None:
    before = set(threading.enumerate())
    minds = Minds(root)
    for caller in (ALICE, BOB):
        minds.call_sync(caller, lambda v: v.search("anything"))
    assert minds.watcher is not None and minds.watcher.wait_idle("alice", 10)
    minds.close()
    minds.close()  # twice is harmless
    left = [t for t in set(threading.enumerate()) - before if type(t).__name__ != "InotifyFD"]
    assert left == []  # (watchdog's one inotify reader is shared by the whole process, and stays)
    for mind in ("alice", "bob"):
        assert lock_holder(root / ".memfile" / f"watch-{mind}.lock") is None
        assert not marker(root, mind).exists()
    with pytest.raises(RuntimeError, match="closed"):
        minds.call_sync(ALICE, lambda v: v.list())


def test_without_watching_nothing_is_watched_and_hand_edits_are_still_seen(root: Path) -> None:
    minds = Minds(root, watch=False)
    try:
        assert minds.call_sync(ALICE, lambda v: v.list()) == []
        assert minds.watcher is None
        assert lock_holder(root / ".memfile" / "watch-alice.lock") is None
        write(root / "alice" / "fact" / "wifi.md", "zebra42 by hand\n")
        assert minds.call_sync(ALICE, lambda v: [hit.memory.key for hit in v.search("zebra42")]) == ["wifi"]
    finally:
        minds.close()


# --- stores that wait together share a commit; a call applies what the watcher saw first ---------------------


def test_stores_that_wait_together_share_one_commit_and_each_hears_its_own_answer(minds: Minds, root: Path) -> None:
    minds.call_sync(ALICE, lambda v: v.list())
    commits = int(git(root, "rev-list", "--count", "HEAD"))

    async def five_stores(release: threading.Event) -> list[Any]:
        tasks = [
            asyncio.ensure_future(minds.store(ALICE, {"category": "fact", "key": f"k{n}", "content": f"text {n}"}))
            for n in range(4)
        ]
        tasks.append(asyncio.ensure_future(minds.store(ALICE, {"category": "fact", "key": "x", "content": "y", "priority": "critical"})))  # fmt: skip
        await asyncio.sleep(0.05)  # every store is waiting now
        release.set()
        return await asyncio.gather(*tasks, return_exceptions=True)

    with worker_held(minds, ALICE) as release:
        results = asyncio.run(five_stores(release))
    assert [r.memory.key for r in results[:4]] == ["k0", "k1", "k2", "k3"]
    assert isinstance(results[4], Refused)  # an agent stores at most high: refused alone
    assert len({r.commit for r in results[:4]}) == 1
    assert int(git(root, "rev-list", "--count", "HEAD")) == commits + 1
    assert "Memfile-Key: bot-alice" in git(root, "log", "-1", "--format=%B").splitlines()


def test_stores_of_several_agent_keys_share_a_commit_and_each_key_names_its_own(minds: Minds, root: Path) -> None:
    minds.call_sync(ALICE, lambda v: v.list())
    other = Caller("alice", Source.AGENT, "bot-alice-2")

    async def stores(release: threading.Event) -> list[Any]:
        tasks = [
            asyncio.ensure_future(minds.store(caller, {"category": "fact", "key": key, "content": f"by {key}"}))
            for caller, key in ((ALICE, "a1"), (other, "b1"), (ALICE, "a2"), (BOB, "elsewhere"))
        ]
        await asyncio.sleep(0.05)
        release.set()
        return await asyncio.gather(*tasks)

    with worker_held(minds, ALICE) as release:
        a1, b1, a2, elsewhere = asyncio.run(stores(release))
    assert a1.commit == b1.commit == a2.commit != elsewhere.commit  # another mind: its own commit
    body = git(root, "show", "-s", "--format=%B", a1.commit).splitlines()
    assert "Memfile-Key: bot-alice fact/a1 fact/a2" in body and "Memfile-Key: bot-alice-2 fact/b1" in body
    assert git(root, "show", "-s", "--format=%(trailers:key=Memfile-Key,valueonly)", a1.commit).split() == [
        "bot-alice", "fact/a1", "fact/a2", "bot-alice-2", "fact/b1"
    ]  # fmt: skip
    assert "Memfile-Key: bot-bob" in git(root, "show", "-s", "--format=%B", elsewhere.commit).splitlines()
    assert all(r.memory.source is Source.AGENT for r in (a1, b1, a2))


def test_stores_of_an_agent_and_a_person_never_share_a_commit(minds: Minds, root: Path) -> None:
    async def two() -> list[Any]:
        return await asyncio.gather(
            minds.store(ALICE, {"category": "fact", "key": "a", "content": "by the agent"}),
            minds.store(ALICE_PERSON, {"category": "fact", "key": "b", "content": "by the person"}),
        )

    agent, person = asyncio.run(two())
    assert agent.commit != person.commit
    assert agent.memory.source is Source.AGENT and person.memory.source is Source.USER


def test_a_call_applies_what_the_watcher_saw_before_it_reads_instead_of_walking(minds: Minds, root: Path) -> None:
    (root / "alice" / "fact").mkdir(exist_ok=True)
    minds.call_sync(ALICE, lambda v: v.list())
    assert minds.watcher is not None and minds.watcher.wait_idle("alice", 10) and marker(root, "alice").exists()
    batcher = minds.watcher._batcher
    batcher.debounce = batcher.max_wait = 60.0  # the watcher's own thread would apply it only in a minute
    write(root / "alice" / "fact" / "wifi.md", "zebra42 by hand\n")
    assert wait_until(lambda: not marker(root, "alice").exists(), 10)  # heard: pending, no longer vouched for

    def look(vault: Vault) -> tuple[bool, list[str]]:
        return watcher_vouches(vault.root, vault.mind), [hit.memory.key for hit in vault.search("zebra42")]

    assert minds.call_sync(ALICE, look) == (True, ["wifi"])  # applied before the call: vouched for, and seen
    assert marker(root, "alice").exists()


def test_an_edit_made_while_the_watch_is_being_set_up_is_never_vouched_away(minds: Minds, root: Path) -> None:
    """A call settles what the watcher heard only once the watch is up: a full diff applied before that
    would put the clean marker back over changes nobody was listening for."""
    (root / "alice" / "fact").mkdir(exist_ok=True)
    minds.call_sync(ALICE, lambda v: v.list())  # the watch is being set up now, on the watcher's thread
    write(root / "alice" / "fact" / "wifi.md", "zebra42 by hand\n")
    assert minds.watcher is not None and minds.watcher.wait_idle("alice", 10)
    assert minds.call_sync(ALICE, lambda v: [hit.memory.key for hit in v.search("zebra42")]) == ["wifi"]


def test_an_edit_whose_event_is_still_on_its_way_is_seen_by_the_next_call(
    minds: Minds, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watcher hears events late (a busy machine): a call waits until everything made before it was
    heard (a barrier file), so the clean marker never vouches over an edit still on its way."""
    (root / "alice" / "fact").mkdir(exist_ok=True)
    minds.call_sync(ALICE, lambda v: v.store("fact", "wifi", "before the edit"))
    assert minds.watcher is not None
    assert wait_until(lambda: minds.watcher.wait_idle("alice", 0.1) and marker(root, "alice").exists(), 10)
    real = MindBatch.record

    def slow(self: MindBatch, event: Any) -> None:
        time.sleep(0.05)  # every event of a mind is recorded 50 ms late
        real(self, event)

    monkeypatch.setattr(MindBatch, "record", slow)
    path = root / "alice" / "fact" / "wifi.md"
    path.write_text(path.read_text().replace("before the edit", "after a hand edit"))
    assert minds.call_sync(ALICE, lambda v: v.get("wifi").content) == "after a hand edit"


# --- while git makes a store's commit, the worker answers reads ------------------------------------------


def within(seconds: float, fn: Callable[[], Any]) -> list[Any]:
    """`[fn()]` when it returns within `seconds`, else `[]` (it goes on in its thread)."""
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    thread.start()
    thread.join(seconds)
    return result


def test_reads_are_answered_while_a_store_waits_for_git_and_writes_wait_their_turn(minds: Minds, root: Path) -> None:
    minds.call_sync(ALICE, lambda v: v.store("fact", "known", "the tea is green"))
    minds.call_sync(BOB, lambda v: v.list())
    gate, entered = root.parent / "gate", root.parent / "entered"
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(f"#!/bin/sh\ntouch '{entered}'\nwhile [ ! -e '{gate}' ]; do sleep 0.01; done\n", encoding="utf-8")
    hook.chmod(0o755)
    store = threading.Thread(
        target=minds.call_sync, args=(ALICE, lambda v: v.store("fact", "slow", "made while reads go on"))
    )
    store.start()
    try:
        assert wait_until(entered.exists, 10)  # git is making the commit now, and waits for the gate
        hits = within(
            10, lambda: minds.call_sync(ALICE, lambda v: [h.memory.key for h in v.search("tea green")], read=True)
        )
        assert hits == [["known"]]  # answered while the commit is still being made
        assert within(10, lambda: minds.call_sync(BOB, lambda v: v.list(), read=True)) == [[]]  # another mind too
        written: list[object] = []
        writer = threading.Thread(
            target=lambda: written.append(minds.call_sync(BOB, lambda v: v.store("fact", "b", "x")))
        )
        writer.start()
        time.sleep(0.3)
        assert written == [] and store.is_alive()  # a write waits for the store before it (no read)
    finally:
        gate.touch()
    store.join(10)
    writer.join(10)
    assert not store.is_alive() and written and not writer.is_alive()
    assert git(root, "log", "-1", "--format=%s").startswith("store fact/b")
    assert git(root, "show", "--stat", "--format=%s", "HEAD~1").startswith("store fact/slow")
    assert minds.call_sync(ALICE, lambda v: v.get("slow").content) == "made while reads go on"


def test_calls_that_waited_together_share_one_barrier_and_a_later_edit_is_still_seen(minds: Minds, root: Path) -> None:
    minds.call_sync(ALICE, lambda v: v.store("fact", "tea", "green tea"))
    assert minds.watcher is not None

    async def five_reads(release: threading.Event) -> list[Any]:
        tasks = [asyncio.ensure_future(minds.call(ALICE, lambda v: v.get("tea").content, read=True)) for _ in range(5)]
        await asyncio.sleep(0.05)  # every read is queued now, behind the held call
        release.set()
        return await asyncio.gather(*tasks)

    with worker_held(minds, ALICE) as release:
        made = minds.watcher._barrier_made
        assert asyncio.run(five_reads(release)) == ["green tea"] * 5
    assert minds.watcher._barrier_made - made <= 1  # the first read's barrier, made after all came in
    path = root / "alice" / "fact" / "tea.md"
    path.write_text(path.read_text(encoding="utf-8").replace("green tea", "black tea"), encoding="utf-8")
    assert minds.call_sync(ALICE, lambda v: v.get("tea").content) == "black tea"  # made after: a barrier of its own


def test_a_commit_git_refuses_takes_its_memory_back_from_the_reads_made_meanwhile(minds: Minds, root: Path) -> None:
    minds.call_sync(ALICE, lambda v: v.store("fact", "known", "the tea is green"))
    gate, entered = root.parent / "gate", root.parent / "entered"
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(
        f"#!/bin/sh\ntouch '{entered}'\nwhile [ ! -e '{gate}' ]; do sleep 0.01; done\nexit 1\n", encoding="utf-8"
    )
    hook.chmod(0o755)
    failed: list[BaseException] = []

    def store() -> None:
        try:
            minds.call_sync(ALICE, lambda v: v.store("fact", "doomed", "green tea with mint"))
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            failed.append(exc)

    thread = threading.Thread(target=store)
    thread.start()
    try:
        assert wait_until(entered.exists, 10)
        during = within(10, lambda: minds.call_sync(ALICE, lambda v: sorted(m.key for m in v.list()), read=True))
        assert during and "known" in during[0]  # answered while git is at work (the new one may show)
    finally:
        gate.touch()
    thread.join(10)
    assert failed and type(failed[0]).__name__ == "GitError"
    assert minds.call_sync(ALICE, lambda v: sorted(m.key for m in v.list()), read=True) == ["known"]
    assert minds.call_sync(ALICE, lambda v: [h.memory.key for h in v.search("mint")], read=True) == []
    assert not (root / "alice" / "fact" / "doomed.md").exists()
    assert git(root, "status", "--porcelain").strip() == ""


def test_git_loose_objects_are_packed_beside_the_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memfile.git import LOOSE_MOST
    from memfile.git.store import loose_objects

    monkeypatch.setattr(worker, "TIDY_EVERY", 0.05)
    root = Vault.init(tmp_path / "v", "alice").root
    many = root / "many"
    many.mkdir()
    for i in range(LOOSE_MOST + 50):  # what many commits leave: objects git keeps loose until gc.auto (6,700)
        (many / f"{i}.txt").write_text(f"object {i}\n")
    git(root, "add", "many")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "many files")
    assert loose_objects(root) > LOOSE_MOST
    with Minds(root, watch=False) as minds:
        assert wait_until(lambda: loose_objects(root) <= LOOSE_MOST, timeout=30)
        stored = minds.call_sync(ALICE, lambda v: v.store("fact", "office", "Hanoi"))
        assert minds.call_sync(ALICE, lambda v: len(v.history(stored.memory.ref))) == 1
    fsck = subprocess.run(["git", "fsck", "--no-dangling"], cwd=root, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr
