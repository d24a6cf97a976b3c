"""Hits' memories decoded once per Whoosh segment, parsed queries kept across searchers (score_cache).

After a store, a long-lived process has a new searcher and a new, empty
`ScoreCache`; the memories of the old segments' documents are kept
(`SegmentMemories`, the trick `segment_memories`), and so are the parsed
queries (`ParsedQueries`, the trick `shared_queries`). A real long-lived
Vault, after random stores, overwrites, forgets, supersedes, hand edits,
merges and a reindex, gives the plain path's hits (memories, scores, order,
snippets) and recall texts, and a fresh Vault's; a search right after a store
decodes only the new segments' memories and parses nothing again; a query
that fails to parse is never kept; segments of one id in two indexes (a
reseeded `random`) never lend each other memories; a query parsed for one
schema never serves another.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from churn import body, random_changes, under_plain

from memfile import Vault
from memfile.config import plain
from memfile.errors import InvalidInput
from memfile.index import score_cache
from memfile.index.score_cache import ParsedQueries, ScoreCache, SegmentMasks, SegmentMemories

QUERIES = [
    "alpha",
    "bravo charlie",
    "delta echo foxtrot",
    "What about golf and hotel?",
    '"alpha bravo"',
    "tag:red alpha",
    "zulu",
]
TRICKS = "segment_memories,shared_queries"

skip_plain = pytest.mark.skipif(
    plain("segment_memories") or plain("shared_queries"),
    reason="tests the tricks themselves: MEMFILE_PLAIN turns them off",
)


def hits(vault: Vault, text: str, **options: Any) -> list[tuple[Any, float, str, int]]:
    """Every hit: its whole memory, score, snippet and rank."""
    return [(h.memory, h.score, h.snippet, h.rank) for h in vault.search(text, limit=1000, **options)]


def recalled(vault: Vault, text: str) -> str:
    return str(vault.recall(100_000, query=text, limit=50))


@pytest.fixture
def plain_tricks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Call a function with both tricks turned off (their plain path alone)."""
    yield under_plain(monkeypatch, TRICKS)


def fresh(root: Path) -> Vault:
    return Vault.open(root, "michael")


def assert_close(got: list[Any], expected: list[Any]) -> None:
    """Same memories, snippets and scores as a fresh Vault's first search (Whoosh's collector adds a query's
    words in another order: the last bits may differ), in the same order but for such ties."""
    assert len(got) == len(expected)
    assert sorted(m.ref for m, *_ in got) == sorted(m.ref for m, *_ in expected)
    by_ref = {m.ref: (m, snippet) for m, _, snippet, _ in expected}
    for (memory, score, snippet, _), (want, want_score, _, _) in zip(got, expected):
        assert (memory, snippet) == by_ref[memory.ref]
        assert score == pytest.approx(want_score, rel=1e-9)
        if memory.ref != want.ref:
            assert abs(score - want_score) < 1e-9 * max(1.0, abs(score))


def assert_same_as_plain_and_fresh(vault: Vault, plain_tricks: Any) -> None:
    """The long-lived Vault's hits and recalls are the plain path's, and a fresh Vault's first ones."""
    other = fresh(vault.root)  # its own searcher, under the plain path
    try:
        for text in QUERIES:
            for options in ({}, {"include_superseded": True}):
                got = hits(vault, text, **options)
                assert got == plain_tricks(hits, other, text, **options), text
                first = fresh(vault.root)
                try:
                    assert_close(got, hits(first, text, **options))
                finally:
                    first.close()
            text_recalled = recalled(vault, text)
            assert text_recalled == plain_tricks(recalled, other, text), text
            first = fresh(vault.root)
            try:
                assert text_recalled == recalled(first, text), text
            finally:
                first.close()
    finally:
        other.close()


@pytest.mark.slow
def test_a_long_lived_vault_searches_and_recalls_as_the_plain_path_and_a_fresh_vault(
    vault: Vault, plain_tricks: Any
) -> None:
    r = random.Random(23)
    keys: list[str] = []
    random_changes(vault, r, 20, keys, hand_edits=True)
    assert_same_as_plain_and_fresh(vault, plain_tricks)
    for _ in range(3):  # a few changes between searches: each store a new segment, with deletions in old ones
        random_changes(vault, r, 3, keys, hand_edits=True)
        assert_same_as_plain_and_fresh(vault, plain_tricks)
    random_changes(vault, r, 12, keys, hand_edits=True)  # small segments pile up: Whoosh merges them
    assert_same_as_plain_and_fresh(vault, plain_tricks)
    vault.reindex()  # a new index, one segment of new id
    assert_same_as_plain_and_fresh(vault, plain_tricks)
    random_changes(vault, r, 2, keys, hand_edits=True)
    assert_same_as_plain_and_fresh(vault, plain_tricks)


def segment_ids(vault: Vault) -> set[str]:
    store = vault._index.store
    assert store is not None and store._searcher is not None
    return {sub.reader().segment().segment_id() for sub, _ in store._searcher.leaf_searchers()}


def live_store(vault: Vault) -> Any:
    store = vault._index.store
    assert store is not None and store._searcher is not None and store._warm is not None
    return store


@skip_plain
def test_a_search_right_after_a_store_decodes_only_the_new_segments_memories(vault: Vault) -> None:
    r = random.Random(5)
    for n in range(12):
        vault.store("note", f"m{n:02d}", "alpha " + body(r))
    kept = score_cache.SEGMENTS.memories
    assert len(hits(vault, "alpha")) == 12
    recalled(vault, "alpha")
    seen = segment_ids(vault)
    for n in range(8):  # new keys and overwrites; some commits merge small segments into a new one
        vault.store("note", f"m{r.randrange(16):02d}", "alpha " + body(r))
        before, known = kept.decoded, set(kept._kept)
        got = hits(vault, "alpha")
        recalled(vault, "alpha")
        ids = segment_ids(vault)
        new = ids - seen
        decoded = set(kept._kept) - known
        assert kept.decoded - before == len(decoded)  # nothing decoded again in place of a kept memory
        assert new and {segment[0] for segment, _ in decoded} <= new  # only the new segments' memories
        assert 1 <= len(decoded) < len(got)
        seen |= ids


@skip_plain
def test_the_parsed_query_of_a_text_is_reused_by_the_next_searcher(vault: Vault) -> None:
    vault.store("note", "one", "alpha bravo")
    vault.search("alpha bravo")
    store = live_store(vault)
    searcher, parsed = store._searcher, store._warm._queries["alpha bravo"]
    queries = score_cache.SEGMENTS.queries
    before = queries.parsed
    vault.store("note", "two", "alpha charlie")
    assert [h.memory.key for h in vault.search("alpha bravo")] == ["one", "two"]
    assert store._searcher is not searcher  # a new searcher, a new ScoreCache
    assert store._warm._queries["alpha bravo"] is parsed
    assert queries.parsed == before
    vault.search("alpha delta")  # a new text is parsed once
    assert queries.parsed == before + 1


def test_a_query_that_fails_to_parse_is_never_kept(vault: Vault) -> None:
    vault.store("note", "one", "alpha bravo")
    queries = score_cache.SEGMENTS.queries
    before = queries.parsed, dict(queries._kept)
    for text in ("the what", "  ?  ", "alpha" * 1000):
        for _ in range(2):  # refused again, not answered from what was kept
            with pytest.raises(InvalidInput):
                vault.search(text)
            with pytest.raises(InvalidInput):
                vault.recall(query=text)
        assert text not in live_store(vault)._warm._queries
    assert (queries.parsed, dict(queries._kept)) == before
    assert [h.memory.key for h in vault.search("alpha")] == ["one"]


def test_the_kept_queries_refuse_a_bad_query_every_time() -> None:
    kept = ParsedQueries(most=2)
    calls = []

    def bad() -> Any:
        calls.append(1)
        raise InvalidInput("query", "x", "words")

    for _ in range(2):
        with pytest.raises(InvalidInput):
            kept.get(0, "x", bad)
    assert calls == [1, 1] and not kept._kept and kept.parsed == 0
    for n in range(5):  # the least recently used go first
        assert kept.get(0, f"q{n}", lambda n=n: f"parsed {n}") == f"parsed {n}"
    assert list(kept._kept) == [(0, "q3"), (0, "q4")]
    assert kept.get(1, "q4", lambda: "another schema") == "another schema"


def ram_searcher(schema: Any, texts: list[str]) -> Any:
    from whoosh.filedb.filestore import RamStorage

    from memfile.index.query import weighting

    ix = RamStorage().create_index(schema)
    writer = ix.writer()
    for n, text in enumerate(texts):
        writer.add_document(path=f"m/note/k{n}.md", text=text)
    writer.commit()
    return ix.searcher(weighting=weighting())


@skip_plain
def test_a_query_parsed_for_one_schema_never_serves_another() -> None:
    """`tag:red` is a field of memfile's schema; where `tags` is no field, it is words."""
    from whoosh import fields

    from memfile.index.persisted import schema

    shared = SegmentMasks()
    ours = ScoreCache(ram_searcher(schema(), ["alpha"]), segments=shared)
    other_schema = fields.Schema(path=fields.ID(stored=True), text=fields.TEXT(), doc=fields.STORED)
    other = ScoreCache(ram_searcher(other_schema, ["alpha"]), segments=shared)
    mine = ours.parsed("tag:red alpha")
    theirs = other.parsed("tag:red alpha")
    assert mine != theirs
    assert "tags" in {term[0] for term in mine.iter_all_terms()}
    assert "tags" not in {term[0] for term in theirs.iter_all_terms()}
    again = ScoreCache(ram_searcher(schema(), ["bravo"]), segments=shared)  # another index, the same schema
    assert again.parsed("tag:red alpha") is mine
    assert shared.queries.parsed == 2


@skip_plain
def test_segments_of_one_id_in_two_vaults_never_lend_each_other_memories(tmp_path: Path) -> None:
    """Whoosh draws segment ids from the global `random`: seeded again, it gives a second index the same ids."""
    state = random.getstate()
    vaults = [Vault.init(tmp_path / name, "michael", "Michael's Mind") for name in ("a", "b")]
    try:
        ids = []
        for vault, content in zip(vaults, ("alpha from the first vault", "alpha from the second vault")):
            vault.search("alpha") if vault.list() else None
            random.seed(2026)
            vault.store("note", "one", content)
            assert [h.memory.content for h in vault.search("alpha")] == [content]
            ids.append(segment_ids(vault))
        assert ids[0] == ids[1]  # the same segment ids, other memories
        for vault, content in zip(vaults, ("alpha from the first vault", "alpha from the second vault")):
            assert [h.memory.content for h in vault.search("alpha")] == [content]
    finally:
        random.setstate(state)
        for vault in vaults:
            vault.close()


@skip_plain
def test_a_vault_copied_elsewhere_gives_its_own_memories(tmp_path: Path, vault: Vault) -> None:
    """A copy holds the same segments (ids and documents) until it writes its own: only those are shared."""
    r = random.Random(9)
    for n in range(10):
        vault.store("note", f"m{n:02d}", "alpha " + body(r))
    hits(vault, "alpha")
    copy = tmp_path / "copy"
    shutil.copytree(vault.root, copy)
    kept = score_cache.SEGMENTS.memories
    other = fresh(copy)
    try:
        for step in range(2):
            for root, searched in ((copy, other), (vault.root, vault)):
                known, before = set(kept._kept), kept.decoded
                got = hits(searched, "alpha")
                assert kept.decoded - before == len(set(kept._kept) - known)  # none decoded twice
                first = fresh(root)
                try:
                    assert_close(got, hits(first, "alpha"))
                finally:
                    first.close()
            other.store("note", "m03", f"alpha alpha alpha from the copy {step}")  # each its own new segment
            vault.store("note", "m03", f"alpha from the original {step}")
        contents = {h.memory.content for h in other.search("alpha", limit=100)}
        assert "alpha alpha alpha from the copy 1" in contents and "alpha from the original 1" not in contents
        contents = {h.memory.content for h in vault.search("alpha", limit=100)}
        assert "alpha from the original 1" in contents and "alpha alpha alpha from the copy 1" not in contents
    finally:
        other.close()


def test_segment_memories_keep_at_most_their_bound() -> None:
    kept = SegmentMemories(most=3)
    name = ("memories_v15_x", 10, b"first", b"last")
    decoded: list[int] = []

    def decode(n: int) -> Any:
        decoded.append(n)
        return f"memory {n}"

    for n in range(5):
        assert kept.memory(name, n, lambda n=n: decode(n)) == f"memory {n}"
    assert kept.memory(name, 4, lambda: decode(99)) == "memory 4"  # kept
    assert kept.memory((*name[:3], b"other last"), 4, lambda: decode(100)) == "memory 100"  # another segment
    assert len(kept._kept) == 3 and decoded == [0, 1, 2, 3, 4, 100] and kept.decoded == 6


def test_plain_tricks_keep_nothing_across_searchers(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMFILE_PLAIN", TRICKS)
    memories, queries = score_cache.SEGMENTS.memories, score_cache.SEGMENTS.queries
    before = memories.decoded, queries.parsed, len(queries._kept)
    vault.store("note", "one", "deploy notes")
    vault.store("note", "two", "deploy notes again", supersedes="note/one")
    assert [h.memory.key for h in vault.search("deploy notes")] == ["two"]
    assert "deploy notes" in str(vault.recall(query="deploy notes"))
    assert (memories.decoded, queries.parsed, len(queries._kept)) == before
