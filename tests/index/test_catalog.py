"""The catalog: a stat-only diff of the files that is never wrong (a rename that keeps every stat,
two files swapping names, a touch of one nanosecond), reads that never wait for a writer of it, and a
log that big writes leave empty. Real vaults, the real catalog file.
"""

from __future__ import annotations

import os
import sqlite3
import time

import pytest
from helpers import index_of

from memfile import Vault
from memfile.index import CATALOG_NAME
from memfile.index.catalog import Catalog
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


def paths_found(vault: Vault, query: str) -> list[str]:
    return [hit.memory.path for hit in vault.search(query)]


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


def test_a_read_never_waits_for_a_writer_of_the_catalog(notes: Vault) -> None:
    notes.store("fact", "echo", "Echo talks about lighthouses.")
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
    try:
        assert index_of(notes.root).store.check() is False  # not damage: nothing made anew
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
    catalog.write(small, [], {row[0]: (1, 1, i) for i, row in enumerate(small)}, {})
    assert log.stat().st_size > 0  # a small write stays in the log (SQLite moves it in later)
    reader = sqlite3.connect(catalog.path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM files").fetchall()  # a reader holds the log's snapshot
    big = [issue_row(f"fact/b{i}.md", 1, "bad") for i in range(BIG_WRITE)]
    started = time.monotonic()
    catalog.write(big, [], {row[0]: (1, 1, i) for i, row in enumerate(big)}, {})
    assert time.monotonic() - started < 10  # the reader in the way is not waited for (busy timeout 30 s)
    reader.execute("COMMIT")
    reader.close()
    catalog.write(big, [], {row[0]: (1, 1, i) for i, row in enumerate(big)}, {})
    assert log.stat().st_size == 0
    assert len(catalog.issues()) == 10 + BIG_WRITE
    catalog.close()
