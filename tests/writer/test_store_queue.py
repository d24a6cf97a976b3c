"""The store queue (memfile/store_queue.py): stores that wait for the writer lock are committed together.

The test holds the vault's writer lock itself, starts real `memfile store` processes (they queue
their requests), waits until every request is in the queue, then lets the lock go: whichever process
gets it stores them all. No sleeps decide an outcome: the test waits for files to appear.
"""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import commit_count, git

from memfile import Vault, store_queue
from memfile.errors import LockTimeout, Refused
from memfile.files import writer_lock


@contextmanager
def lock_held(root: Path) -> Iterator[None]:
    with writer_lock(root / ".memfile" / "lock", 5):
        yield


def queue(root: Path, mind: str = "michael") -> Path:
    return root / ".memfile" / "queue" / mind


def wait_for(predicate, what: str, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def start_store(root: Path, *args: str, agent: bool = False) -> subprocess.Popen[str]:
    env = {**os.environ, **({"MEMFILE_SOURCE": "agent"} if agent else {})}
    return subprocess.Popen(
        [sys.executable, "-m", "memfile", "--vault", str(root), "store", *args, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def requests_waiting(root: Path) -> int:
    return len(list(queue(root).glob("*.req"))) if queue(root).exists() else 0


def queued_in_order(root: Path, *stores: list[str]) -> list[subprocess.Popen[str]]:
    """`memfile store` processes whose requests wait in the queue in this order, the lock then let go."""
    procs = []
    with lock_held(root):
        for n, args in enumerate(stores, 1):
            procs.append(start_store(root, *args))
            wait_for(lambda n=n: requests_waiting(root) == n, f"request {n}")  # type: ignore[misc]
    return procs


def test_stores_waiting_for_the_lock_share_one_commit(vault: Vault) -> None:
    root = vault.root
    before = commit_count(root)
    with lock_held(root):
        procs = [start_store(root, "fact", f"waiting_{n}", f"queued note {n}") for n in range(3)]
        wait_for(lambda: requests_waiting(root) == 3, "three queued requests")
    results = [finish(p) for p in procs]
    assert all(code == 0 for code, _, _ in results), results
    stored = [json.loads(out) for _, out, _ in results]
    assert {s["key"] for s in stored} == {"waiting_0", "waiting_1", "waiting_2"}
    assert len({s["commit"] for s in stored}) == 1 and all(s["created"] for s in stored)
    assert commit_count(root) == before + 1
    subject = git(root, "log", "-1", "--format=%s").strip()  # in the order the requests arrived
    assert subject.startswith("store ") and subject.endswith(" (user)")
    assert sorted(subject[6:-7].split(", ")) == ["fact/waiting_0", "fact/waiting_1", "fact/waiting_2"]
    assert {m.key for m in vault.list()} == {"waiting_0", "waiting_1", "waiting_2"}
    assert git(root, "status", "--porcelain").strip() == ""
    assert not list(queue(root).iterdir())  # every request and every result picked up


def test_two_versions_of_one_memory_never_share_a_commit(vault: Vault) -> None:
    root = vault.root
    vault.store("fact", "city", "Lives in Hanoi")
    first, second = queued_in_order(root, ["fact", "city", "Lives in Saigon"], ["fact", "city", "Lives in Da Nang"])
    assert finish(first)[0] == 0 and finish(second)[0] == 0
    versions = [v.memory.content for v in vault.history("fact/city") if v.memory is not None]
    assert versions == ["Lives in Da Nang", "Lives in Saigon", "Lives in Hanoi"]  # newest first, each kept


def test_a_queued_store_that_is_refused_gets_its_own_error(vault: Vault) -> None:
    root = vault.root
    vault.store("preference", "editor", "Uses vim")  # a person's memory: verified
    with lock_held(root):
        refused = start_store(root, "preference", "editor", "Uses emacs", agent=True)
        fine = start_store(root, "fact", "pet", "Has a cat", agent=True)
        wait_for(lambda: requests_waiting(root) == 2, "two queued requests")
    code, out, err = finish(refused)
    assert code == 2 and "verified by a person" in err and "Traceback" not in err
    assert finish(fine)[0] == 0
    assert vault.get("preference/editor").content == "Uses vim"
    assert vault.get("fact/pet").source.value == "agent"


def test_a_store_that_cannot_get_the_lock_withdraws_its_request(vault: Vault) -> None:
    root = vault.root
    vault.close()
    toml = root / "memfile.toml"
    toml.write_text("lock_timeout = 1\n" + toml.read_text(encoding="utf-8"), encoding="utf-8")
    with lock_held(root):
        code, _, err = finish(start_store(root, "fact", "late", "never stored"))
        assert code == 4 and "busy" in err
        assert requests_waiting(root) == 0
    assert not (root / "michael" / "fact" / "late.md").exists()
    with pytest.raises(LockTimeout), lock_held(root):
        Vault.open(root).store("fact", "late", "never stored either")
    assert not list(queue(root).iterdir())


def orphan_request(key: str) -> dict[str, object]:
    return {
        "category": "fact",
        "key": key,
        "content": f"{key}: asked for, holder killed",
        "priority": None,
        "now": "2026-11-30T10:00:00+00:00",
        "tags": ["kept"],
        "confidence": None,
        "source": "user",
        "actor": "user",
        "expires": "unset",
        "supersedes": None,
    }


def test_a_request_claimed_by_a_killed_holder_is_stored_by_the_next_one(vault: Vault) -> None:
    root = vault.root
    ticket = store_queue.Ticket(queue(root), f"{time.time_ns():020d}-{os.getpid()}-abcd")  # this (live) process
    queue(root).mkdir(parents=True, exist_ok=True)
    ticket.file("claimed").write_bytes(marshal.dumps(orphan_request("orphan")))  # what a holder killed mid-store leaves
    vault.store("fact", "next", "the next store")
    orphan = vault.get("fact/orphan")
    assert (orphan.content, orphan.tags, orphan.verified) == ("orphan: asked for, holder killed", ("kept",), True)
    assert (
        store_queue.decode(store_queue.take_result(ticket)).memory.key == "orphan"
    )  # its result waits for its process
    assert git(root, "status", "--porcelain").strip() == ""


def test_a_request_whose_process_is_gone_is_dropped(vault: Vault) -> None:
    root = vault.root
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    for state, key in (("req", "stale_waiting"), ("claimed", "stale_claimed")):
        ticket = store_queue.Ticket(queue(root), f"{time.time_ns():020d}-{pid}-abcd")
        queue(root).mkdir(parents=True, exist_ok=True)
        ticket.file(state).write_bytes(marshal.dumps(orphan_request(key)))
    vault.store("fact", "now", "stored now")
    assert {m.key for m in vault.list()} == {"now"}
    assert not list(queue(root).iterdir())


def test_a_supersede_is_committed_on_its_own(vault: Vault) -> None:
    root = vault.root
    vault.store("fact", "job", "Works at Acme")
    plain, supersede = queued_in_order(
        root, ["fact", "hobby", "Climbs"], ["fact", "job_now", "Works at Initech", "--supersedes", "fact/job"]
    )
    assert finish(plain)[0] == 0 and finish(supersede)[0] == 0
    subjects = git(root, "log", "-2", "--format=%s").splitlines()
    assert sorted(subjects) == ["store fact/hobby (user)", "store fact/job_now (user), superseding fact/job"]
    assert vault.get("fact/job").superseded


def test_results_carry_errors_with_their_class_and_fields(tmp_path: Path) -> None:
    ticket = store_queue.Ticket(tmp_path, "t")
    store_queue.settle(ticket, store_queue.encode(Refused("an agent cannot do that; ask the user")))
    with pytest.raises(Refused, match="ask the user"):
        store_queue.decode(store_queue.take_result(ticket))
    from memfile.errors import InvalidInput

    store_queue.settle(ticket, store_queue.encode(InvalidInput("supersedes", "x", "another memory")))
    with pytest.raises(InvalidInput) as caught:
        store_queue.decode(store_queue.take_result(ticket))
    assert caught.value.field == "supersedes" and caught.value.exit_code == 2
    store_queue.settle(ticket, store_queue.encode(OSError(28, "No space left on device")))
    with pytest.raises(Exception, match="failed unexpectedly.*No space left"):
        store_queue.decode(store_queue.take_result(ticket))
