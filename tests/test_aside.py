"""A read's stat walk beside its work: a forked child walks the files while the index answers.

The answer stands only when the child's walk has the digest the catalog
recorded and the catalog is still at that version; an edit made before the
read, or a write by another process while it runs, gets the work run again
after a real refresh. Real vaults, real forks.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from helpers import another_thread_running, write

from memfile import Vault
from memfile.config import plain
from memfile.index import RefreshReport, View, fastpath
from memfile.index.catalog import fingerprint, half_digest, joined
from memfile.index.fastpath import Aside, split_walk
from memfile.index.source import stat_walk

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="reads walk beside their work on Linux only"),
    pytest.mark.skipif(plain("walk"), reason="tests the trick itself: MEMFILE_PLAIN turns it off"),
]


@pytest.fixture
def notes(vault: Vault) -> Vault:
    vault.store("fact", "alpha", "The alpha note talks about zeppelins.")
    vault.store("fact", "bravo", "The bravo note talks about submarines.")
    # A search that finds nothing changed since the stores records the digest of its walk. A file
    # written within two clock ticks of its indexing is read again instead (git's racy-clean rule), and
    # then no digest is recorded by that search: search until one is (at once, unless the stores were
    # that recent).
    deadline = time.monotonic() + 30
    while True:
        vault.search("zeppelins")
        if vault._index.store.catalog.vouched() is not None or time.monotonic() > deadline:
            return vault
        time.sleep(0.01)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Aside | None]:
    """Every Aside a read starts (the real one, recorded)."""
    found: list[Aside | None] = []
    real = Aside.start.__func__  # type: ignore[attr-defined]

    def start(cls: type[Aside], compute: object) -> Aside | None:
        found.append(real(cls, compute))
        return found[-1]

    monkeypatch.setattr(fastpath.Aside, "start", classmethod(start))
    monkeypatch.setattr(fastpath, "FORK_FROM", 0)  # these small minds split their walks as big ones do
    return found


def keys_read(vault: Vault, calls: list[RefreshReport]) -> list[str]:
    """A read through `Index.read` that records each report its work was given."""

    def work(view: View) -> list[str]:
        calls.append(view.report)
        return sorted(m.key for m in view.memories())

    return vault._index.read(work)


def test_a_read_of_an_unchanged_mind_runs_its_work_once_beside_the_walk(
    notes: Vault, started: list[Aside | None]
) -> None:
    calls: list[RefreshReport] = []
    assert keys_read(notes, calls) == ["alpha", "bravo"]
    assert len(calls) == 1 and calls[0].changed == 0
    assert len(started) == 2 and None not in started  # one child per half of the walk


def test_an_edit_made_before_the_read_gets_the_work_run_again_after_a_refresh(
    notes: Vault, started: list[Aside | None]
) -> None:
    (notes.mind_dir / "fact" / "charlie.md").write_text("Charlie talks about lighthouses.\n", encoding="utf-8")
    calls: list[RefreshReport] = []
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


def test_a_write_by_another_process_during_the_work_gets_the_work_run_again(
    notes: Vault, started: list[Aside | None]
) -> None:
    other = Vault.open(notes.root, notes.mind)
    calls: list[RefreshReport] = []

    def work(view: View) -> list[str]:
        calls.append(view.report)
        keys = sorted(m.key for m in view.memories())
        if len(calls) == 1:
            other.store("fact", "delta", "Delta was stored while the first read worked.")
        return keys

    assert notes._index.read(work) == ["alpha", "bravo", "delta"]
    assert len(calls) == 2


def test_no_child_is_forked_while_other_threads_run(notes: Vault, started: list[Aside | None]) -> None:
    with another_thread_running():
        calls: list[RefreshReport] = []
        assert keys_read(notes, calls) == ["alpha", "bravo"]
        assert started and all(aside is None for aside in started) and len(calls) == 1


def test_a_mind_with_no_recorded_digest_is_refreshed_by_a_walk_in_two_halves(
    vault: Vault, started: list[Aside | None]
) -> None:
    vault.store("fact", "alpha", "A store records no digest of a whole walk.")
    vault.store("fact", "bravo", "Nor does this one.")
    assert [m.key for m in vault.memories()] == ["alpha", "bravo"]
    assert len(started) == 1 and started[0] is not None  # the child walked one half, this process the other


def test_the_halves_of_a_walk_make_the_whole_walk_and_its_digest(tmp_path: Path) -> None:
    mind = tmp_path / "mind"
    for folder in ("fact", "skill", "fact/deep"):
        (mind / folder).mkdir(parents=True, exist_ok=True)
    names = [
        f"{folder}/{stem}.md"
        for folder in ("fact", "skill", "fact/deep")
        for stem in ("a", "b", "note-1", "note-2", "x9", "é")
    ]
    for name in names:
        (mind / name).write_text(name, encoding="utf-8")
    whole = stat_walk(mind, tmp_path)
    halves = [stat_walk(mind, tmp_path, part=part) for part in (0, 1)]
    assert halves[0] and halves[1] and not halves[0].keys() & halves[1].keys()
    assert all(fastpath.half_of(path) == part for part in (0, 1) for path in halves[part])
    assert halves[0] | halves[1] == whole == split_walk(mind, tmp_path)
    for half in halves:  # each half lists its files in the order of the whole walk
        assert list(half) == [path for path in whole if path in half]
    assert joined("1.0", half_digest(halves[0]), half_digest(halves[1])) == fingerprint("1.0", whole)
    assert fingerprint("1.0", whole) == fingerprint("1.0", split_walk(mind, tmp_path))
    assert fingerprint("1.0", whole) != fingerprint("2.0", whole)


def test_a_walk_gives_each_memory_files_stat_and_leaves_no_descriptor_open(tmp_path: Path) -> None:
    """Folders are listed from a descriptor (each stat looks up a name, not a path): the stats are os.stat's,
    a symlinked file is followed, dot-folders, symlinked folders and other files are skipped."""
    mind = tmp_path / "mind"
    for folder in ("fact/deep/deeper", ".git", "skill"):
        (mind / folder).mkdir(parents=True, exist_ok=True)
    for name in ("fact/a.md", "fact/deep/deeper/b.md", ".git/c.md", "skill/d.txt", "skill/e.md"):
        (mind / name).write_text(name, encoding="utf-8")
    (mind / "skill" / "link.md").symlink_to(mind / "fact" / "a.md")
    (mind / "linked").symlink_to(mind / "fact", target_is_directory=True)
    open_before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    walked = stat_walk(mind, tmp_path)
    assert sorted(walked) == ["mind/fact/a.md", "mind/fact/deep/deeper/b.md", "mind/skill/e.md", "mind/skill/link.md"]
    for path, stat in walked.items():
        info = os.stat(tmp_path / path)
        assert stat == (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
    assert stat_walk(mind / "fact" / "a.md", tmp_path) == {} and stat_walk(mind / "gone", tmp_path) == {}
    if open_before is not None:
        assert len(os.listdir("/proc/self/fd")) == open_before


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


def test_a_whole_recall_shows_a_hand_edit_made_after_the_digest_was_recorded(notes: Vault) -> None:
    notes.recall()  # reads through the catalog's rendered entries
    path = notes.mind_dir / "fact" / "alpha.md"
    path.write_text(path.read_text(encoding="utf-8").replace("zeppelins", "hovercraft"), encoding="utf-8")
    text = notes.recall()
    assert "hovercraft" in text and "zeppelins" not in text


def test_a_mind_with_fewer_files_than_fork_from_is_walked_without_a_child(
    vault: Vault, started: list[Aside | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below `FORK_FROM` recorded files a fork costs more than half a walk saves: no child, same answers."""
    for key in ("alpha", "bravo", "charlie"):
        vault.store("fact", key, f"The {key} note.")
    vault.search("note")
    monkeypatch.setattr(fastpath, "FORK_FROM", 4)
    started.clear()
    write(vault.mind_dir / "fact" / "delta.md", "---\ncategory: fact\nkey: delta\n---\nThe delta note.\n")
    assert sorted(m.key for m in vault.memories()) == ["alpha", "bravo", "charlie", "delta"]
    assert started == []  # three files recorded: walked here alone
    assert [h.memory.key for h in vault.search("delta")] == ["delta"]
    started.clear()
    vault.search("note")  # four files recorded now: the walk is split again
    assert started and all(aside is not None for aside in started)
