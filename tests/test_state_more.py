"""The catalog's recorded stats after a small write: only the stats it changed are written (`state_more`),
folded into the whole state (`state`) once they are many; whoever reads the catalog gets the same state
either way. Real vaults, the real catalog file, other Vault objects as other processes.
"""

from __future__ import annotations

import marshal
import random
import sqlite3

import pytest

from memfile import Vault
from memfile.config import plain
from memfile.index import CATALOG_NAME
from memfile.index.catalog import STATE_MORE, Catalog
from memfile.index.source import stat_walk

pytestmark = pytest.mark.skipif(plain("state_more"), reason="tests the trick itself: MEMFILE_PLAIN turns it off")


def meta(vault: Vault, name: str) -> bytes | None:
    path = vault.root / ".memfile" / "index" / vault.mind / CATALOG_NAME
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
    return row[0] if row else None


def recorded_fresh(vault: Vault) -> dict[str, object]:
    """The recorded state as a process that opens the catalog now reads it."""
    catalog = Catalog(vault.root / ".memfile" / "index" / vault.mind / CATALOG_NAME)
    try:
        return catalog.recorded()
    finally:
        catalog.close()


def test_a_store_writes_only_its_own_stat_and_every_reader_sees_the_whole_state(vault: Vault) -> None:
    for n in range(5):
        vault.store("fact", f"first_{n}", f"note number {n}")
    vault.reindex()  # a whole walk: the whole state written, nothing pending
    base = meta(vault, "state")
    assert marshal.loads(meta(vault, "state_more") or marshal.dumps({})) == {}

    stored = vault.store("fact", "later", "a later note")
    assert meta(vault, "state") == base  # the 5 other stats were not written again
    assert set(marshal.loads(meta(vault, "state_more") or b"")) == {stored.memory.path}
    recorded = recorded_fresh(vault)
    assert set(recorded) == set(stat_walk(vault.mind_dir, vault.root))
    vault.forget("first_0")
    recorded = recorded_fresh(vault)
    assert set(recorded) == set(stat_walk(vault.mind_dir, vault.root))  # a file gone is gone from the state
    assert marshal.loads(meta(vault, "state_more") or b"")[f"{vault.mind}/fact/first_0.md"] is None


def test_many_small_writes_are_folded_into_the_whole_state(vault: Vault) -> None:
    vault.store("fact", "seed", "the first")
    vault.reindex()
    for n in range(STATE_MORE // 8 + 2):
        vault.store_many([{"category": "note", "key": f"n{n}_{k}", "content": f"note {n} {k}"} for k in range(8)])
    pending = marshal.loads(meta(vault, "state_more") or b"")
    assert len(pending) < STATE_MORE  # folded once it grew past the limit, and started again
    whole = marshal.loads(meta(vault, "state") or b"")
    assert len(whole) > STATE_MORE
    assert set(recorded_fresh(vault)) == set(stat_walk(vault.mind_dir, vault.root))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_any_mix_of_writers_leaves_a_state_every_reader_agrees_with(tmp_path: object, seed: int) -> None:
    """Stores, forgets and hand edits by one long-lived Vault and by others (another process's view): after
    each, a fresh reader's state names exactly the files on disk, and every Vault answers as the files say."""
    from pathlib import Path

    root = Path(str(tmp_path)) / "vault"
    Vault.init(root, "mind").close()
    rng = random.Random(seed)
    long = Vault.open(root, "mind")
    try:
        for step in range(40):
            other = rng.random() < 0.3
            vault = Vault.open(root, "mind") if other else long
            try:
                action = rng.choice(["store", "store", "forget", "edit"])
                keys = [m.key for m in vault.memories()]
                if action == "store" or not keys:
                    vault.store("fact", f"k{rng.randrange(12)}", f"text {step} {rng.random()}")
                elif action == "forget":
                    vault.forget(rng.choice(keys))
                else:
                    chosen = rng.choice(keys)
                    path = root / next(m.path for m in vault.memories() if m.key == chosen)
                    path.write_text(path.read_text(encoding="utf-8") + f"\nedited at step {step}\n", encoding="utf-8")
            finally:
                if other:
                    vault.close()
            truth = {m.path: m.content for m in Vault.open(root, "mind").memories()}
            assert {m.path: m.content for m in long.memories()} == truth
            assert set(recorded_fresh(long)) == set(stat_walk(long.mind_dir, root))
    finally:
        long.close()
