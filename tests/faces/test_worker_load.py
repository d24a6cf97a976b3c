"""The worker under load (`memfile.worker.Minds`): a store lets the reads waiting go first for up to
`STORE_GATHER` seconds, so that the stores coming in meanwhile share its commit; it never waits when no
read does, never longer than that, and writes keep their order. What the stores make is the same as
without the gathering."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import git, worker_held

from memfile import Vault, worker
from memfile.model import Source
from memfile.worker import Caller, Minds

ALICE = Caller("alice", Source.AGENT, "bot-alice")
ALICE_2 = Caller("alice", Source.AGENT, "bot-alice-2")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    Vault.init(tmp_path / "vault", "alice").close()
    return tmp_path / "vault"


@pytest.fixture
def minds(root: Path) -> Iterator[Minds]:
    running = Minds(root)
    try:
        running.call_sync(ALICE, lambda v: v.list())  # the mind opened, the watch up
        yield running
    finally:
        running.close()


@pytest.fixture
def held(minds: Minds) -> Iterator[threading.Event]:
    """The worker kept busy until the event is set: every call made meanwhile queues up behind."""
    with worker_held(minds, ALICE) as release:
        yield release


def keys_now(vault: Vault) -> list[str]:
    return sorted(m.key for m in vault.list())


def commits(root: Path) -> int:
    return int(git(root, "rev-list", "--count", "HEAD"))


def store(minds: Minds, caller: Caller, key: str, content: str | None = None) -> Any:
    return minds.store(caller, {"category": "fact", "key": key, "content": content or f"about {key}"})


def test_reads_waiting_go_before_a_store_and_the_stores_meanwhile_share_its_commit(
    minds: Minds, root: Path, held: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker, "STORE_GATHER", 60.0)  # only the reads waiting hold the stores back here
    before = commits(root)

    async def load() -> tuple[list[Any], list[Any]]:
        first = asyncio.ensure_future(store(minds, ALICE, "k1"))
        await asyncio.sleep(0.05)
        reads = [asyncio.ensure_future(minds.call(ALICE, keys_now, read=True)) for _ in range(3)]
        await asyncio.sleep(0.05)
        later = [asyncio.ensure_future(store(minds, c, k)) for c, k in ((ALICE_2, "k2"), (ALICE, "k3"))]
        await asyncio.sleep(0.05)  # all queued behind the held call now
        held.set()
        return await asyncio.gather(*reads), await asyncio.gather(first, *later)

    seen, stored = asyncio.run(load())
    assert seen == [[], [], []]  # queued after the first store, answered before it: nothing stored yet
    assert [r.memory.key for r in stored] == ["k1", "k2", "k3"] and all(r.created for r in stored)
    assert len({r.commit for r in stored}) == 1 and commits(root) == before + 1  # one commit for the three
    body = git(root, "log", "-1", "--format=%B").splitlines()
    assert "Memfile-Key: bot-alice fact/k1 fact/k3" in body and "Memfile-Key: bot-alice-2 fact/k2" in body
    assert minds.call_sync(ALICE, keys_now, read=True) == ["k1", "k2", "k3"]
    assert git(root, "status", "--porcelain").strip() == ""


def test_a_store_that_finds_no_read_waiting_is_made_at_once(minds: Minds, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker, "STORE_GATHER", 600.0)
    start = time.monotonic()
    result = asyncio.run(store(minds, ALICE, "alone"))
    assert result.created and result.commit
    assert time.monotonic() - start < 60  # far below the gathering time: nothing made it wait


def test_a_store_waits_no_longer_than_its_gathering_time_under_an_endless_stream_of_reads(
    minds: Minds, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker, "STORE_GATHER", 0.3)
    stop = threading.Event()
    reads = [0]

    def reader() -> None:
        while not stop.is_set():
            minds.call_sync(ALICE, keys_now, read=True)
            reads[0] += 1

    readers = [threading.Thread(target=reader, daemon=True) for _ in range(4)]  # one runs, three wait
    for thread in readers:
        thread.start()
    try:
        assert _wait(lambda: reads[0] >= 20)
        done = threading.Event()
        outcome: list[Any] = []
        threading.Thread(
            target=lambda: (outcome.append(asyncio.run(store(minds, ALICE, "amid_reads"))), done.set()), daemon=True
        ).start()
        assert done.wait(60)  # made while the reads still stream in: the gathering ended it
        assert outcome[0].created and not stop.is_set()
    finally:
        stop.set()
        for thread in readers:
            thread.join(30)
    assert git(root, "log", "-1", "--format=%s").startswith("store fact/amid_reads")


def test_writes_keep_their_order_behind_a_gathering_store(
    minds: Minds, root: Path, held: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker, "STORE_GATHER", 60.0)

    async def load() -> list[Any]:
        first = asyncio.ensure_future(store(minds, ALICE, "first", "the first content"))
        await asyncio.sleep(0.05)
        # a write that is no store of the group (an update through `call`), then a read, queued behind it
        update = asyncio.ensure_future(minds.call(ALICE, lambda v: v.store("fact", "first", "the second content")))
        await asyncio.sleep(0.05)
        read = asyncio.ensure_future(minds.call(ALICE, keys_now, read=True))
        await asyncio.sleep(0.05)
        held.set()
        return await asyncio.gather(first, update, read)

    first, update, read = asyncio.run(load())
    assert read == []  # went ahead of both writes
    assert first.created and not update.created and update.changed  # the update came second, as asked
    assert minds.call_sync(ALICE, lambda v: v.get("first").content, read=True) == "the second content"
    subjects = git(root, "log", "-2", "--format=%s").splitlines()
    assert subjects[1].startswith("store fact/first") and subjects[0].startswith("store fact/first")
    assert git(root, "show", "HEAD:alice/fact/first.md").count("the second content") == 1


@pytest.mark.slow
def test_stores_under_reads_make_the_same_memories_gathered_or_not(tmp_path: Path) -> None:
    """The gathering only changes when stores are made: the memories, their files and git's content are
    those of the plain path (`STORE_GATHER = 0`: each store's job at its turn)."""
    made: dict[float, Any] = {}
    for gather in (0.0, 0.5):
        root = tmp_path / f"vault-{gather}"
        Vault.init(root, "alice").close()
        saved = worker.STORE_GATHER
        worker.STORE_GATHER = gather
        try:
            with Minds(root) as minds:
                minds.call_sync(ALICE, lambda v: v.list())
                stop = threading.Event()

                def reader(m: Minds = minds, s: threading.Event = stop) -> None:
                    while not s.is_set():
                        m.call_sync(ALICE, keys_now, read=True)

                readers = [threading.Thread(target=reader, daemon=True) for _ in range(3)]
                for thread in readers:
                    thread.start()

                async def stores(m: Minds = minds) -> list[Any]:
                    tasks = []
                    for n in range(24):
                        caller = ALICE if n % 3 else ALICE_2
                        tasks.append(asyncio.ensure_future(store(m, caller, f"k{n % 12}", f"version {n} of {n % 12}")))
                        await asyncio.sleep(0.01)
                    return await asyncio.gather(*tasks)

                results = asyncio.run(stores())
                stop.set()
                for thread in readers:
                    thread.join(30)
                memories = minds.call_sync(
                    ALICE, lambda v: sorted((m.key, m.content, m.source.value, tuple(m.tags)) for m in v.list())
                )
        finally:
            worker.STORE_GATHER = saved
        assert git(root, "status", "--porcelain").strip() == ""
        at_head = {f"k{n}": git(root, "show", f"HEAD:alice/fact/k{n}.md") for n in range(12)}
        made[gather] = (
            [(r.memory.key, r.memory.content, r.created, r.changed) for r in results],
            memories,
            {key: text.split("---", 2)[2] for key, text in at_head.items()},  # the bodies (front matter has times)
        )
    assert made[0.0] == made[0.5]


def _wait(predicate: Any, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="thread names are shown through /proc (Linux)")
def test_the_worker_thread_is_named_where_the_system_shows_threads(minds: Minds) -> None:
    tid = minds._worker.native_id
    assert Path(f"/proc/self/task/{tid}/comm").read_text(encoding="ascii").strip() == worker.WORKER_THREAD
    assert Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text(encoding="ascii").strip() != (
        worker.WORKER_THREAD
    )  # only the worker: the thread that made the Minds keeps its own name
