"""The catalog's digest of an unchanged walk: a check that costs one compare, and is never wrong.

A whole walk whose digest matches the one recorded for the catalog's current
version means nothing changed; anything else (a rename that keeps every stat,
two files swapping names, a touch, a write by any process) falls back to the
full stat diff. Reads record the digest without ever waiting for a writer.
Real vaults, the real catalog file.
"""

from __future__ import annotations

import os
import sqlite3
import time

import pytest

from memfile import Vault
from memfile.config import plain
from memfile.index import CATALOG_NAME
from memfile.index.catalog import Catalog, fingerprint
from memfile.index.source import stat_walk


@pytest.fixture
def notes(vault: Vault) -> Vault:
    vault.store("fact", "alpha", "The alpha note talks about zeppelins.")
    vault.store("fact", "bravo", "The bravo note talks about submarines and more words here.")
    vault.store("skill", "charlie", "Charlie knows origami.")
    return vault


def catalog_of(vault: Vault) -> Catalog:
    return Catalog(vault.root / ".memfile" / "index" / vault.mind / CATALOG_NAME)


def walk(vault: Vault) -> dict[str, tuple[int, int, int]]:
    return stat_walk(vault.mind_dir, vault.root)


def recorded_digest(vault: Vault) -> bytes | None:
    return catalog_of(vault).meta("fingerprint")


def paths_found(vault: Vault, query: str) -> list[str]:
    return [hit.memory.path for hit in vault.search(query)]


def test_a_read_that_finds_nothing_changed_records_the_digest_and_the_next_read_uses_it(notes: Vault) -> None:
    time.sleep(0.05)  # past the racy window of the last write: a walk now may vouch for every file
    notes.search("zeppelins")  # the stores were batches of given paths: no whole walk behind them yet
    catalog = catalog_of(notes)
    digest = recorded_digest(notes)
    assert digest == fingerprint(catalog.meta("last_update"), walk(notes))
    assert catalog.stale(walk(notes), None) == ([], [])


def test_a_write_makes_the_recorded_digest_void(notes: Vault) -> None:
    notes.search("zeppelins")
    before = catalog_of(notes).meta("last_update")
    notes.store("fact", "delta", "Delta is new.")
    catalog = catalog_of(notes)
    assert catalog.meta("last_update") != before
    assert recorded_digest(notes) is None or recorded_digest(notes) != fingerprint(
        catalog.meta("last_update"), walk(notes)
    )
    assert paths_found(notes, "delta") == ["michael/fact/delta.md"]


def test_a_reindex_records_the_digest_of_its_walk(notes: Vault) -> None:
    notes.reindex()
    catalog = catalog_of(notes)
    assert recorded_digest(notes) == fingerprint(catalog.meta("last_update"), walk(notes))


def test_two_files_swapping_names_keep_every_stat_and_are_still_seen(notes: Vault) -> None:
    notes.search("zeppelins")
    folder = notes.mind_dir / "fact"
    alpha, bravo = folder / "alpha.md", folder / "bravo.md"
    before = walk(notes)
    os.rename(alpha, folder / "swap.tmp")
    os.rename(bravo, alpha)
    os.rename(folder / "swap.tmp", bravo)
    after = walk(notes)
    same = lambda stats: sorted((s[0], s[1], s[3]) for s in stats.values())  # noqa: E731 - a rename moves the ctime
    assert same(before) == same(after)  # the same size, mtime and inode, on other names
    assert paths_found(notes, "zeppelins") == ["michael/fact/bravo.md"]
    assert paths_found(notes, "submarines") == ["michael/fact/alpha.md"]


def test_a_rename_that_keeps_the_stat_is_seen(notes: Vault) -> None:
    notes.search("origami")
    os.rename(notes.mind_dir / "skill" / "charlie.md", notes.mind_dir / "skill" / "charles.md")
    assert paths_found(notes, "origami") == ["michael/skill/charles.md"]


def test_a_touch_of_one_nanosecond_is_seen(notes: Vault) -> None:
    notes.search("origami")
    path = notes.mind_dir / "skill" / "charlie.md"
    info = path.stat()
    path.write_text(path.read_text(encoding="utf-8").replace("origami", "knitting"), encoding="utf-8")
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1))
    assert paths_found(notes, "knitting") == ["michael/skill/charlie.md"]
    assert paths_found(notes, "origami") == []


def test_a_digest_for_an_older_version_is_never_recorded(notes: Vault) -> None:
    notes.search("zeppelins")
    catalog = catalog_of(notes)
    current = catalog.meta("last_update")
    with sqlite3.connect(catalog.path) as db:
        db.execute("DELETE FROM meta WHERE name = 'fingerprint'")
    catalog._vouch(walk(notes), "12345.0")  # a version the catalog no longer has
    assert recorded_digest(notes) is None
    catalog._vouch(walk(notes), current)
    assert recorded_digest(notes) == fingerprint(current, walk(notes))


def test_a_read_never_waits_for_a_writer_of_the_catalog(notes: Vault) -> None:
    notes.store("fact", "echo", "Echo talks about lighthouses.")  # no digest for this version yet
    holder = sqlite3.connect(catalog_of(notes).path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing the catalog
    try:
        reader = Vault.open(notes.root, notes.mind)
        started = time.monotonic()
        assert [hit.memory.key for hit in reader.search("lighthouses")] == ["echo"]
        assert time.monotonic() - started < 10  # the catalog's busy timeout is 30 s
        reader.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert recorded_digest(notes) is None  # it could not be recorded, and that is all


# --- masks: the superseded and expired documents of one generation of the full-text index -----------


def generation_of(vault: Vault) -> str:
    index = vault._index.store
    assert index is not None and index._warm is not None and index._warm.masks is not None
    return index._warm.masks.generation


@pytest.mark.skipif(plain("masks") or plain("score_cache"), reason="tests the trick itself: MEMFILE_PLAIN turns it off")
def test_a_search_keeps_its_mask_for_the_next_process_which_takes_it(
    notes: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memfile.index import score_cache as warm

    notes.store("fact", "old", "The zeppelin hangar was in Friedrichshafen.")
    notes.store("fact", "new", "The zeppelin hangar is now a museum.", supersedes="fact/old")
    first = [hit.memory.key for hit in notes.search("hangar")]
    assert first == ["new"]
    catalog = catalog_of(notes)
    generation = generation_of(notes)
    kept = catalog.mask(generation, (False, False), time.time())
    assert kept is not None and len(kept[2]) == 1  # fact/old, superseded
    monkeypatch.setattr(warm, "hidden_docs", lambda *args: pytest.fail("the kept mask should have been taken"))
    other = Vault.open(notes.root, notes.mind)
    assert [hit.memory.key for hit in other.search("hangar")] == first
    other.close()


@pytest.mark.skipif(plain("masks") or plain("score_cache"), reason="tests the trick itself: MEMFILE_PLAIN turns it off")
def test_a_mask_of_another_generation_is_never_taken(notes: Vault) -> None:
    notes.search("zeppelins")
    before = generation_of(notes)
    notes.store("fact", "alpha2", "More zeppelins here.", supersedes="fact/alpha")
    other = Vault.open(notes.root, notes.mind)
    assert [hit.memory.key for hit in other.search("zeppelins")] == ["alpha2"]  # alpha is superseded now
    assert generation_of(other) != before
    other.close()


@pytest.mark.skipif(plain("masks") or plain("score_cache"), reason="tests the trick itself: MEMFILE_PLAIN turns it off")
def test_a_kept_mask_holds_until_the_next_memory_expires(notes: Vault) -> None:
    from datetime import datetime, timedelta, timezone

    from memfile.index import SearchOptions

    soon = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=30)
    notes.store("note", "ticket", "The zeppelin ticket is valid today.", expires=soon.isoformat())
    index = notes._index.store
    assert index is not None
    now = datetime.now(timezone.utc)
    assert [h.memory.key for h in index.search("ticket", SearchOptions(), now)] == ["ticket"]
    kept = catalog_of(notes).mask(generation_of(notes), (False, False), now.timestamp())
    assert kept is not None and kept[1] == soon.timestamp()
    later = soon + timedelta(seconds=1)
    assert catalog_of(notes).mask(generation_of(notes), (False, False), later.timestamp()) is None
    fresh = Vault.open(notes.root, notes.mind)
    fresh.refresh()
    assert fresh._index.store is not None
    assert fresh._index.store.search("ticket", SearchOptions(), later) == []  # expired by then: found again
    fresh.close()


@pytest.mark.skipif(plain("masks") or plain("score_cache"), reason="tests the trick itself: MEMFILE_PLAIN turns it off")
def test_a_damaged_mask_row_is_ignored_and_written_anew(notes: Vault) -> None:
    notes.search("zeppelins")
    with sqlite3.connect(catalog_of(notes).path) as db:
        db.execute("INSERT OR REPLACE INTO meta VALUES ('masks', ?)", (b"\x00garbage",))
    other = Vault.open(notes.root, notes.mind)
    assert [hit.memory.key for hit in other.search("zeppelins")] == ["alpha"]
    assert catalog_of(notes).mask(generation_of(other), (False, False), time.time()) is not None
    other.close()


@pytest.mark.skipif(plain("masks") or plain("score_cache"), reason="tests the trick itself: MEMFILE_PLAIN turns it off")
def test_a_mask_kept_before_the_index_was_rebuilt_is_never_taken(notes: Vault) -> None:
    """Whoosh numbers generations from 0 again in a rebuilt index; a process still reading the old one
    may write its mask into the new catalog. The segments' random ids tell the two apart."""
    notes.store("fact", "old", "The hangar was in Friedrichshafen.")
    notes.store("fact", "new", "The hangar is now a museum.", supersedes="fact/old")
    assert [hit.memory.key for hit in notes.search("hangar")] == ["new"]
    before, kept = generation_of(notes), catalog_of(notes).meta("masks")
    notes.reindex()
    assert [hit.memory.key for hit in notes.search("hangar")] == ["new"]
    assert generation_of(notes) != before
    with sqlite3.connect(catalog_of(notes).path) as db:  # the old process's write, into the new catalog
        db.execute("INSERT OR REPLACE INTO meta VALUES ('masks', ?)", (kept,))
    other = Vault.open(notes.root, notes.mind)
    assert [hit.memory.key for hit in other.search("hangar")] == ["new"]
    assert sorted(hit.memory.key for hit in other.search("zeppelins origami")) == ["alpha", "charlie"]
    other.close()


def test_a_segment_file_that_vanishes_while_checked_is_not_taken_for_damage(notes: Vault) -> None:
    """Another process's commit merges segments away while this one checks them: that is no reason to
    throw the index away and rebuild it (it was, silently, and every reader started over)."""
    import json

    folder = notes.root / ".memfile" / "index" / notes.mind
    notes.search("zeppelins")
    recorded = next(iter(json.loads(catalog_of(notes).meta("segments"))))
    kept = folder / "kept-aside"
    (folder / recorded).rename(kept)
    (folder / recorded).symlink_to(folder / "gone")  # listed by the check, then not found
    assert notes._index.store is not None
    try:
        notes._index.store._check_segments()  # no error: not damage
    finally:
        (folder / recorded).unlink()
        kept.rename(folder / recorded)
    other = Vault.open(notes.root, notes.mind)
    assert [hit.memory.key for hit in other.search("zeppelins")] == ["alpha"]
    other.close()


# --- SQLite's write-ahead log -----------------------------------------------------------------------


def test_a_big_write_leaves_the_log_empty_and_a_small_one_never_waits_for_readers(tmp_path) -> None:
    """Every process's first connection reads the whole log: a bulk write empties it at once."""
    from memfile.index.catalog import BIG_WRITE, issue_row

    catalog = Catalog(tmp_path / "catalog.sqlite")
    log = tmp_path / "catalog.sqlite-wal"
    small = [issue_row(f"fact/s{i}.md", 1, "bad") for i in range(10)]
    catalog.write(small, [], {row[0]: (1, 1, i) for i, row in enumerate(small)}, {}, None)
    assert log.stat().st_size > 0  # a small write stays in the log (SQLite moves it in later)
    reader = sqlite3.connect(catalog.path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM files").fetchall()  # a reader holds the log's snapshot
    big = [issue_row(f"fact/b{i}.md", 1, "bad") for i in range(BIG_WRITE)]
    started = time.monotonic()
    catalog.write(big, [], {row[0]: (1, 1, i) for i, row in enumerate(big)}, {}, None)
    assert time.monotonic() - started < 10  # the reader in the way is not waited for (busy timeout 30 s)
    reader.execute("COMMIT")
    reader.close()
    catalog.write(big, [], {row[0]: (1, 1, i) for i, row in enumerate(big)}, {}, None)
    assert log.stat().st_size == 0
    assert len(catalog.issues()) == 10 + BIG_WRITE
    catalog.close()
