"""A read's stat walk beside its work: a forked child walks the files while the index answers.

The answer stands only when the child's walk has the digest the catalog
recorded and the catalog is still at that version; an edit made before the
read, or a write by another process while it runs, gets the work run again
after a real refresh. Real vaults, real forks.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from memfile import Vault, files
from memfile.files import Aside
from memfile.index import SyncReport

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads walk beside their work on Linux only")


@pytest.fixture
def notes(vault: Vault) -> Vault:
    vault.store("fact", "alpha", "The alpha note talks about zeppelins.")
    vault.store("fact", "bravo", "The bravo note talks about submarines.")
    vault.search("zeppelins")  # finds nothing changed since the stores: records the digest of its walk
    return vault


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Aside | None]:
    """Every Aside a read starts (the real one, recorded)."""
    found: list[Aside | None] = []
    real = Aside.start.__func__  # type: ignore[attr-defined]

    def start(cls: type[Aside], compute: object) -> Aside | None:
        found.append(real(cls, compute))
        return found[-1]

    monkeypatch.setattr(files.Aside, "start", classmethod(start))
    return found


def keys_read(vault: Vault, calls: list[SyncReport]) -> list[str]:
    """A read through `Vault._read` that records each report its work was given."""

    def work(report: SyncReport) -> list[str]:
        calls.append(report)
        return sorted(m.key for m in vault._memories(report))

    return vault._read(work)


def test_a_read_of_an_unchanged_mind_runs_its_work_once_beside_the_walk(notes: Vault, started: list[Aside | None]) -> None:
    calls: list[SyncReport] = []
    assert keys_read(notes, calls) == ["alpha", "bravo"]
    assert len(calls) == 1 and calls[0].changed == 0
    assert len(started) == 1 and started[0] is not None


def test_an_edit_made_before_the_read_gets_the_work_run_again_after_a_refresh(notes: Vault, started: list[Aside | None]) -> None:
    (notes.mind_dir / "fact" / "charlie.md").write_text("Charlie talks about lighthouses.\n", encoding="utf-8")
    calls: list[SyncReport] = []
    assert keys_read(notes, calls) == ["alpha", "bravo", "charlie"]
    assert len(calls) == 2 and calls[1].added == 1
    assert [hit.memory.key for hit in notes.search("lighthouses")] == ["charlie"]


def test_every_read_sees_an_edit_made_after_the_digest_was_recorded(notes: Vault) -> None:
    path = notes.mind_dir / "fact" / "alpha.md"
    path.write_text(path.read_text(encoding="utf-8").replace("zeppelins", "hovercraft"), encoding="utf-8")
    assert [hit.memory.key for hit in notes.search("hovercraft")] == ["alpha"]
    notes.search("zeppelins")  # records the digest again
    (notes.mind_dir / "fact" / "bravo.md").unlink()
    assert "bravo" not in notes.recall()
    assert [m.key for m in notes.memories()] == ["alpha"]


def test_a_write_by_another_process_during_the_work_gets_the_work_run_again(notes: Vault, started: list[Aside | None]) -> None:
    other = Vault.open(notes.root, notes.mind)
    calls: list[SyncReport] = []

    def work(report: SyncReport) -> list[str]:
        calls.append(report)
        keys = sorted(m.key for m in notes._memories(report))
        if len(calls) == 1:
            other.store("fact", "delta", "Delta was stored while the first read worked.")
        return keys

    assert notes._read(work) == ["alpha", "bravo", "delta"]
    assert len(calls) == 2


def test_no_child_is_forked_while_other_threads_run(notes: Vault, started: list[Aside | None]) -> None:
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    try:
        calls: list[SyncReport] = []
        assert keys_read(notes, calls) == ["alpha", "bravo"]
        assert started == [None] and len(calls) == 1
    finally:
        release.set()
        thread.join()


def test_a_mind_with_no_recorded_digest_walks_in_process(vault: Vault, started: list[Aside | None]) -> None:
    vault.store("fact", "alpha", "A store records no digest of a whole walk.")
    assert [m.key for m in vault.memories()] == ["alpha"]
    assert started == []


def test_the_child_gives_its_bytes_however_many(tmp_path: Path) -> None:
    big = os.urandom(1_000_000)  # far more than a pipe holds: the child waits for the parent to read
    aside = Aside.start(lambda: big)
    assert aside is not None and aside.result() == big


def test_a_child_that_fails_gives_none(tmp_path: Path) -> None:
    def fail() -> bytes:
        raise OSError("the walk failed")

    aside = Aside.start(fail)
    assert aside is not None and aside.result() is None


def test_the_child_leaves_without_flushing_what_this_process_buffered(tmp_path: Path) -> None:
    path = tmp_path / "buffered.txt"
    with path.open("w", encoding="utf-8") as buffered:
        buffered.write("written once")  # still in this process's buffer when the child is forked
        aside = Aside.start(lambda: b"done")
        assert aside is not None and aside.result() == b"done"
    assert path.read_text(encoding="utf-8") == "written once"
