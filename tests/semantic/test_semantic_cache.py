"""The vector cache (memfile.semantic.cache) over a real vault, with a deterministic fake embedder.

- Keys: a rename, a new tag or a re-categorisation re-embeds nothing; an edit re-embeds one memory.
- Crashes and damage: `rm -rf .memfile` rebuilds (also under a live process); a file that is not
  a database, or was written for another dimension, is thrown away; a row of the wrong length
  counts as missing.
- Work in steps: `stop()` ends early with the finished batches kept; `progress` is called.
- Pruning drops the rows of removed memories only.
- Two processes embedding the same vault at once leave a sound file with every vector.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from helpers import REPO

from memfile import Vault

np = pytest.importorskip("numpy")

from memfile.semantic.cache import VectorCache, cache_path, script_of, text_hash  # noqa: E402

FAKE = '''
import hashlib
import numpy as np

class FakeEmbedder:
    """Hash-seeded unit vectors: the same text always gets the same vector. Counts what it embeds."""

    def __init__(self, dimension=8, model_id="fake-1"):
        self.dimension = dimension
        self.model_id = model_id
        self.embedded = []

    def _one(self, text):
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).normal(size=self.dimension).astype(np.float32)
        return v / np.linalg.norm(v)

    def embed_documents(self, texts):
        self.embedded.extend(texts)
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, self.dimension), np.float32)

    def embed_query(self, text):
        return self._one(text)
'''
namespace: dict[str, Any] = {}
exec(FAKE, namespace)
FakeEmbedder = namespace["FakeEmbedder"]


def filled(vault: Vault, n: int = 5) -> list[str]:
    contents = [f"Memory number {i} about topic {i * 7}." for i in range(n)]
    for i, content in enumerate(contents):
        vault.store("fact", f"m{i}", content)
    return contents


def open_cache(vault: Vault, embedder: Any) -> VectorCache:
    return VectorCache.open(vault.root, vault.mind, embedder)


def test_every_memory_is_embedded_once_and_counted(vault: Vault) -> None:
    contents = filled(vault)
    embedder = FakeEmbedder()
    cache = open_cache(vault, embedder)
    assert cache.counts(vault.memories()) == (0, 5)
    assert cache.embed(vault.memories()) == 5
    assert sorted(embedder.embedded) == sorted(contents)
    assert cache.counts(vault.memories()) == (5, 5)
    assert cache.missing(vault.memories()) == []
    assert cache.embed(vault.memories()) == 0  # nothing twice
    assert cache.path == vault.root / ".memfile" / f"vectors-{vault.mind}-fake-1.sqlite"
    assert (
        ".memfile"
        not in subprocess.run(["git", "ls-files"], cwd=vault.root, capture_output=True, text=True, check=True).stdout
    )  # never committed

    matrix, kept = cache.matrix_for(vault.memories())
    assert matrix.shape == (5, 8) and matrix.dtype == np.float32
    for row, memory in zip(matrix, kept):
        np.testing.assert_allclose(row, embedder.embed_query(memory.content))


def test_a_long_memory_is_embedded_by_its_first_lines_and_a_short_one_whole(vault: Vault) -> None:
    """The engine embeds a long text window by window (10,000 words took 86 s): only the first
    EMBEDDED_CHARS are embedded, cut at a space; a short content is embedded exactly as stored."""
    from memfile.semantic.cache import EMBEDDED_CHARS

    long = "The harbour crane manual. " + "Check the winch and the cable daily. " * 20_000
    vault.store("note", "manual", long)
    vault.store("note", "short", "A short note about the ferry.")
    fake = FakeEmbedder()
    assert open_cache(vault, fake).embed(vault.memories()) == 2
    by_length = sorted(fake.embedded, key=len)
    assert by_length[0] == "A short note about the ferry."
    assert long.startswith(by_length[1]) and EMBEDDED_CHARS // 2 < len(by_length[1]) <= EMBEDDED_CHARS
    assert by_length[1].endswith("daily.")  # cut between words


def test_a_rename_or_an_unrelated_edit_re_embeds_nothing_and_an_edit_re_embeds_one(vault: Vault) -> None:
    filled(vault)
    embedder = FakeEmbedder()
    cache = open_cache(vault, embedder)
    cache.embed(vault.memories())
    embedder.embedded.clear()

    (vault.mind_dir / "fact" / "m0.md").rename(vault.mind_dir / "fact" / "renamed.md")
    (vault.mind_dir / "note").mkdir()
    (vault.mind_dir / "fact" / "m1.md").rename(vault.mind_dir / "note" / "m1.md")
    vault.store("fact", "m2", "Memory number 2 about topic 14.", tags=["new-tag"], priority="high")
    paths = {m.path for m in vault.memories()}
    assert {"michael/fact/renamed.md", "michael/note/m1.md"} <= paths
    assert cache.missing(vault.memories()) == []
    assert cache.embed(vault.memories()) == 0

    vault.store("fact", "m3", "An edited text.")
    assert [m.key for m in cache.missing(vault.memories())] == ["m3"]
    assert cache.embed(vault.memories()) == 1
    assert embedder.embedded == ["An edited text."]


def test_rm_rf_memfile_rebuilds_and_a_live_cache_notices(vault: Vault) -> None:
    filled(vault)
    cache = open_cache(vault, FakeEmbedder())
    cache.embed(vault.memories())
    shutil.rmtree(vault.root / ".memfile")

    fresh = open_cache(vault, FakeEmbedder())
    assert fresh.counts(vault.memories()) == (0, 5)
    assert fresh.embed(vault.memories()) == 5
    fresh.close()

    shutil.rmtree(vault.root / ".memfile")
    assert cache.embed(vault.memories()) == 5  # the old process starts a new file instead of writing a deleted one
    assert cache.path.exists()
    assert open_cache(vault, FakeEmbedder()).counts(vault.memories()) == (5, 5)


@pytest.mark.parametrize("damage", [b"not a database at all" * 100, b"SQLite format 3\x00" + b"\xff" * 5000, b""])
def test_a_damaged_file_is_thrown_away_and_rebuilt(vault: Vault, damage: bytes) -> None:
    filled(vault)
    path = cache_path(vault.root, vault.mind, "fake-1")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(damage)
    cache = open_cache(vault, FakeEmbedder())
    assert cache.rebuilt or damage == b""  # an empty file is a valid empty database
    assert cache.counts(vault.memories()) == (0, 5)
    assert cache.embed(vault.memories()) == 5
    assert open_cache(vault, FakeEmbedder()).counts(vault.memories()) == (5, 5)


def test_a_file_written_for_another_dimension_is_not_trusted(vault: Vault) -> None:
    filled(vault)
    open_cache(vault, FakeEmbedder(dimension=8)).embed(vault.memories())
    other = open_cache(vault, FakeEmbedder(dimension=16))
    assert other.rebuilt
    assert other.counts(vault.memories()) == (0, 5)
    other.embed(vault.memories())
    assert other.matrix_for(vault.memories())[0].shape == (5, 16)


def test_a_row_of_the_wrong_length_counts_as_missing(vault: Vault) -> None:
    filled(vault, 2)
    memories = vault.memories()
    path = cache_path(vault.root, vault.mind, "fake-1")
    open_cache(vault, FakeEmbedder()).close()
    with sqlite3.connect(path) as db:
        row = (text_hash(memories[0].content), b"\x00" * 12)
        db.execute("INSERT INTO vectors (hash, script, vector) VALUES (?, 'other', ?)", row)
    cache = open_cache(vault, FakeEmbedder())
    assert cache.counts(memories) == (0, 2)


def test_stop_ends_early_and_keeps_the_batches_done(vault: Vault) -> None:
    filled(vault, 10)
    seen: list[tuple[int, int]] = []
    cache = open_cache(vault, FakeEmbedder())
    done = cache.embed(
        vault.memories(), batch=3, progress=lambda d, t: seen.append((d, t)), stop=lambda: len(seen) >= 2
    )
    assert done == 6 and seen == [(3, 10), (6, 10)]
    assert open_cache(vault, FakeEmbedder()).counts(vault.memories()) == (6, 10)
    assert cache.embed(vault.memories(), batch=3) == 4


def test_prune_drops_only_the_rows_no_memory_needs(vault: Vault) -> None:
    filled(vault, 3)
    cache = open_cache(vault, FakeEmbedder())
    cache.embed(vault.memories())
    vault.forget("fact/m0")
    assert cache.prune(vault.memories()) == 1
    assert cache.prune(vault.memories()) == 0
    with sqlite3.connect(cache.path) as db:
        assert db.execute("SELECT count(*) FROM vectors").fetchone()[0] == 2
    assert open_cache(vault, FakeEmbedder()).counts(vault.memories()) == (2, 2)


def test_minds_and_models_have_their_own_files(vault: Vault) -> None:
    (vault.root / "other").mkdir()
    other = Vault.open(vault.root, mind="other")
    assert cache_path(vault.root, "michael", "a") != cache_path(vault.root, "other", "a")
    assert cache_path(vault.root, "michael", "a") != cache_path(vault.root, "michael", "b")
    assert cache_path(vault.root, "m", "model2vec-x/../y:z").parent == vault.root / ".memfile"
    other.store("fact", "x", "Other mind.")
    assert open_cache(other, FakeEmbedder()).embed(other.memories()) == 1
    assert open_cache(vault, FakeEmbedder()).counts(vault.memories()) == (0, 0)


def test_scripts_are_told_apart() -> None:
    assert script_of("ตอนเช้าเขาดื่มกาแฟ") == "th"
    assert script_of("Cô ấy làm nghề gì?") == "vi"
    assert script_of("co ay lam nghe gi") == "other"
    assert script_of("Works as a nurse.") == "other"


def test_centring_removes_each_scripts_mean(vault: Vault) -> None:
    for i, text in enumerate(["Một câu tiếng Việt.", "Câu thứ hai ở đây.", "An English one.", "Another English."]):
        vault.store("fact", f"s{i}", text)
    cache = open_cache(vault, FakeEmbedder())
    cache.embed(vault.memories())
    matrix, kept = cache.matrix_for(vault.memories())
    centred = cache.centred()
    assert centred.shape == matrix.shape
    np.testing.assert_allclose(np.linalg.norm(centred, axis=1), 1.0, rtol=1e-5)
    # two rows per script: centring leaves each pair pointing in opposite directions
    assert np.dot(centred[0], centred[1]) == pytest.approx(-1.0, abs=1e-5)


@pytest.mark.slow
def test_two_processes_embedding_at_once_leave_a_sound_cache(vault: Vault) -> None:
    for i in range(120):
        vault.store("note", f"n{i}", f"Note {i}: " + hashlib.sha256(str(i).encode()).hexdigest())
    script = FAKE + textwrap.dedent(
        f"""
        import sys
        from memfile import Vault
        from memfile.semantic.cache import VectorCache
        vault = Vault.open({str(vault.root)!r}, mind="michael")
        memories = vault.memories()
        if sys.argv[1] == "reverse":
            memories = memories[::-1]
        cache = VectorCache.open(vault.root, vault.mind, FakeEmbedder())
        print(cache.embed(memories, batch=4))
        print(cache.counts(memories))
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, order], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for order in ("forward", "reverse")
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.splitlines()[-1] == "(120, 120)"
    assert sum(int(out.splitlines()[0]) for out, _ in outs) >= 120
    cache = open_cache(vault, FakeEmbedder())
    assert not cache.rebuilt
    assert cache.counts(vault.memories()) == (120, 120)
    with sqlite3.connect(cache.path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT count(*) FROM vectors").fetchone()[0] == 120


def test_nearest_is_every_admitted_memory_ranked_then_cut(vault: Vault) -> None:
    """`nearest` walks the best rows until `depth` memories pass: the same list as ranking every admitted
    memory with a vector (ties by path) and keeping the first `depth`, the plain path it replaces."""
    from memfile.semantic.cache import by_hash

    texts = [f"Memory about topic {i % 13}." for i in range(40)]  # 13 texts, most held by several memories
    for i, text in enumerate(texts):
        vault.store("fact" if i % 3 else "note", f"m{i:02d}", text)
    embedder = FakeEmbedder(dimension=4)  # few dimensions: near ties between rows are common
    cache = open_cache(vault, embedder)
    cache.embed(vault.memories()[:30])
    memories = vault.memories()  # ten of them without a vector
    tests = [lambda m: True, lambda m: m.category == "note", lambda m: m.key.endswith("7"), lambda m: False]
    for seed in range(20):
        query = embedder.embed_query(f"question {seed}")
        for admit in tests:
            for centre in (False, True):
                for depth in (1, 5, 40):
                    ranking = (cache.centred() if centre else cache._all()) @ query
                    raw = cache._all() @ query
                    rows = [(cache._row.get(cache.hash_of(m)), m) for m in memories if admit(m)]
                    ranked = sorted(
                        ((r, m) for r, m in rows if r is not None), key=lambda p: (-ranking[p[0]], p[1].path)
                    )
                    plain = [(m.path, float(raw[r])) for r, m in ranked[:depth]]
                    fast = cache.nearest(query, by_hash(memories), depth, admit=admit, centre=centre)
                    assert [(m.path, c) for m, c in fast] == plain
                    assert cache.nearest(query, by_hash(filter(admit, memories)), depth, centre=centre) == fast


def test_rows_added_after_a_prune_are_seen_by_a_live_cache(vault: Vault) -> None:
    """A prune that deletes the newest rows must not let the next rows take their numbers again: a live
    cache reads the rows added since it last looked by number (`seq`, AUTOINCREMENT)."""
    filled(vault, 4)
    embedder = FakeEmbedder()
    live = open_cache(vault, embedder)
    live.embed(vault.memories())
    assert live.counts(vault.memories()) == (4, 4)  # read: it knows rows 1-4
    vault.forget("fact/m3")  # the newest row's memory
    vault.store("fact", "m0", "Memory number 0, edited.")  # the oldest row's too
    vault.store("fact", "m9", "A new memory.")
    other = open_cache(vault, FakeEmbedder())  # another process's cache on the same file
    assert other.prune(vault.memories()) == 2
    assert other.embed(vault.memories()) == 2
    assert live.counts(vault.memories()) == (4, 4)
    assert sorted(m.key for m in live.matrix_for(vault.memories())[1]) == ["m0", "m1", "m2", "m9"]


def test_a_schema_1_file_is_brought_to_schema_2_with_its_vectors(vault: Vault) -> None:
    contents = filled(vault, 3)
    path = cache_path(vault.root, vault.mind, "fake-1")
    path.parent.mkdir(parents=True, exist_ok=True)
    old = FakeEmbedder()
    with sqlite3.connect(path) as db:  # the layout of schema 1, as the first version wrote it
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("CREATE TABLE vectors (hash TEXT PRIMARY KEY, script TEXT NOT NULL, vector BLOB NOT NULL)")
        meta = {"schema": "1", "model_id": "fake-1", "dimension": "8", "recipe": "content-v1"}
        db.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
        rows = [(text_hash(c), "other", old._one(c).astype("<f4").tobytes()) for c in contents]
        db.executemany("INSERT INTO vectors VALUES (?, ?, ?)", rows)
    db.close()
    embedder = FakeEmbedder()
    cache = open_cache(vault, embedder)
    assert not cache.rebuilt and cache.counts(vault.memories()) == (3, 3) and embedder.embedded == []
    with sqlite3.connect(path) as db:
        assert dict(db.execute("SELECT key, value FROM meta"))["schema"] == "2"
        assert [r[0] for r in db.execute("SELECT seq FROM vectors ORDER BY seq")] == [1, 2, 3]
    db.close()


def test_a_purge_leaves_no_row_or_free_page_of_the_memory(vault: Vault) -> None:
    filled(vault, 3)
    (vault.root / "other").mkdir()
    other = Vault.open(vault.root, mind="other")
    other.store("fact", "m0", "Memory number 0 about topic 0.")  # the same text in another mind: kept there
    for mind_vault in (vault, other):
        open_cache(mind_vault, FakeEmbedder()).embed(mind_vault.memories())
    gone = text_hash("Memory number 0 about topic 0.")
    path = open_cache(vault, FakeEmbedder()).path

    def stored() -> bytes:  # the database and its write-ahead log
        return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))

    assert gone.encode() in stored()
    vault.purge("fact/m0")
    assert gone.encode() not in stored()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM vectors").fetchone()[0] == 2
    assert open_cache(other, FakeEmbedder()).counts(other.memories()) == (1, 1)
