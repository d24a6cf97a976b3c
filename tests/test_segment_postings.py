"""A word's postings decoded once per Whoosh segment (score_cache.SegmentPostings) give exactly Whoosh's scores.

After a store, a long-lived process has a new searcher: its `ScoreCache`
starts empty, but the postings of the segments its earlier searchers met are
kept (`SegmentPostings`, the trick `segment_postings`), so only the new
segment is decoded; each word's scores are then worked out again with the
new searcher's BM25F figures, less the documents deleted since. Generated
indexes (segments added, documents deleted, merged, optimized; searchers old
and new sharing what is kept) check each word's scores against Whoosh's own
matcher, to the last bit. Then a real long-lived Vault: after random stores,
overwrites, forgets, supersedes, merges and a reindex, its searches give the
plain path's hits, scores and order, and those of a fresh Vault's first
search (Whoosh's own collector); a search right after a store decodes only
the new segments.
"""

from __future__ import annotations

import marshal
import random
import shutil
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from churn import VOCABULARY, body, random_changes, under_plain
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memfile import Vault
from memfile.config import plain
from memfile.index import score_cache
from memfile.index import store as index_store
from memfile.index.persisted import schema
from memfile.index.query import weighting
from memfile.index.score_cache import ScoreCache, SegmentMasks
from memfile.model import Category, Memory, memory_to_row

BASE = datetime(2026, 6, 27, 10, 0, tzinfo=timezone.utc)
CATEGORIES = [Category.NOTE, Category.FACT]

# --- generated indexes --------------------------------------------------------

# a memory's words (repeats make weights above 1; lengths differ), and its tags
words = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=12)
put = st.tuples(st.just("put"), st.integers(0, 11), words, st.sampled_from([(), ("red",), ("red", "blue")]))
delete = st.tuples(st.just("delete"), st.integers(0, 11), st.just([]), st.just(()))
# a commit: "segment" (a new segment, never merged), "merge" (Whoosh's merge of small ones), "optimize" (one)
batch = st.tuples(st.lists(put | delete, min_size=1, max_size=6), st.sampled_from(["segment", "merge", "optimize"]))


def document(n: int, text: list[str], tags: tuple[str, ...], version: int) -> dict[str, Any]:
    mem = Memory(
        id=f"mem_{n:04d}{version:04d}",
        mind="m",
        category=CATEGORIES[n % 2],
        key=f"k{n}",
        content=" ".join(text),
        path=f"m/note/k{n}.md",
        created_at=BASE,
        updated_at=BASE,
        tags=list(tags),
    )
    return index_store._document(mem, marshal.dumps(memory_to_row(mem)))


def build(batches: list[tuple[list[Any], str]]) -> list[Any]:
    """A RAM index made by `batches`, and a searcher (memfile's weighting) after each commit."""
    from whoosh.filedb.filestore import RamStorage
    from whoosh.writing import NO_MERGE

    ix = RamStorage().create_index(schema())
    searchers = []
    for version, (steps, commit) in enumerate(batches):
        writer = ix.writer()
        for action, n, text, tags in steps:
            if action == "put":
                writer.update_document(**document(n, text, tags, version))
            else:
                writer.delete_by_term("path", f"m/note/k{n}.md")
        if commit == "segment":
            writer.commit(mergetype=NO_MERGE)
        elif commit == "merge":
            writer.commit()
        else:
            writer.commit(optimize=True)
        searchers.append(ix.searcher(weighting=weighting()))
    return searchers


def terms() -> list[Any]:
    """Every word, a tag (BM25F too), a category (an ID field: Whoosh scores it) and a word no document holds."""
    from whoosh import query

    return [
        *(query.Term("text", word) for word in VOCABULARY),
        query.Term("tags", "red"),
        query.Term("category", "note"),
        query.Term("text", "zulu"),
    ]


def whoosh_scores(searcher: Any, term: Any) -> list[tuple[int, float]]:
    """Every (docnum, score) of a term, from Whoosh's own matchers: the truth."""
    found = []
    context = searcher.context()
    for subsearcher, offset in searcher.leaf_searchers():
        matcher = term.matcher(subsearcher, context)
        while matcher.is_active():
            found.append((matcher.id() + offset, matcher.score()))
            matcher.next()
    return found


def scores_of(cache: ScoreCache, term: Any) -> list[tuple[int, float]]:
    docnums, scores = cache._scores(term)
    return list(zip(docnums, scores))


def assert_exact(searcher: Any, segments: SegmentMasks) -> None:
    """A new ScoreCache of `searcher` sharing `segments` gives, for each term, Whoosh's very floats."""
    cache = ScoreCache(searcher, segments=segments)
    for term in terms():
        truth = whoosh_scores(searcher, term)
        got = scores_of(cache, term)
        assert [d for d, _ in got] == [d for d, _ in truth], term
        assert [s.hex() for _, s in got] == [s.hex() for _, s in truth], term  # to the last bit


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch, min_size=1, max_size=6))
def test_kept_postings_give_whoosh_scores_to_the_last_bit(batches: list[Any]) -> None:
    check_history(batches)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch, min_size=1, max_size=10))
def test_kept_postings_give_whoosh_scores_in_longer_histories(batches: list[Any]) -> None:
    check_history(batches)


def check_history(batches: list[Any]) -> None:
    """Each searcher of the history sharing what is kept as a long-lived process does, then old ones again."""
    searchers = build(batches)
    shared = SegmentMasks()
    for searcher in searchers:
        assert_exact(searcher, shared)
    for searcher in reversed(searchers[:-1]):  # an older searcher (fewer deletions) after a newer one
        assert_exact(searcher, shared)
    tiny = SegmentMasks(postings=5)  # a budget that keeps next to nothing
    for searcher in searchers:
        assert_exact(searcher, tiny)
        assert tiny.postings._held <= 5 or len(tiny.postings._kept) == 1


def test_a_store_decodes_only_the_new_segment_and_deletions_are_left_out_now() -> None:
    """One hand-made history: what is decoded, and an old segment's document deleted after its decoding."""
    alpha = ["alpha", "alpha", "bravo"]
    batches: list[Any] = [
        ([("put", n, alpha[: 1 + n % 3] + ["charlie"] * n, ()) for n in range(6)], "segment"),
        ([("put", 6, ["alpha", "delta"], ())], "segment"),
        ([("put", 2, ["delta"], ())], "segment"),  # k2 in the first segment is deleted
        ([("delete", 0, [], ())], "segment"),  # no new segment: k0 deleted in the first, decoded before
    ]
    searchers = build(batches)
    shared = SegmentMasks()
    kept = shared.postings
    seen: set[str] = set()
    for searcher in searchers:
        ids = {sub.reader().segment().segment_id() for sub, _ in searcher.leaf_searchers()}
        before = kept.decoded
        assert_exact(searcher, shared)
        new = len(ids - seen)
        if not plain("segment_postings"):  # MEMFILE_PLAIN: nothing kept, the scores still exact
            # each new segment's terms decoded once at most (a category term never: not BM25F)
            assert kept.decoded - before <= new * len(terms())
            assert (kept.decoded > before) == (new > 0)
        seen |= ids
    assert_exact(searchers[-1], shared)  # again: nothing left to decode
    leaves = searchers[-1].leaf_searchers()
    assert len(leaves) == 3 and leaves[0][0].reader().segment().deleted_count() == 2


@pytest.mark.skipif(plain("segment_postings"), reason="tests the trick itself: MEMFILE_PLAIN turns it off")
def test_a_first_query_goes_to_whoosh_unless_its_words_postings_are_kept() -> None:
    """A one-shot process (nothing kept) lets Whoosh answer a searcher's first query; a process that
    stays open answers it from the kept postings (a search right after a store), with Whoosh's ranking."""
    from whoosh import query

    searchers = build([([("put", n, ["alpha"] * (1 + n % 3) + ["bravo"] * (n % 2), ())], "segment") for n in range(6)])
    parsed = query.Or([query.Term("text", "alpha"), query.Term("text", "bravo")])
    shared = SegmentMasks()
    assert ScoreCache(searchers[-2], segments=shared).top(parsed, None, set(), 3, count=False) is None
    assert ScoreCache(searchers[-2], segments=SegmentMasks()).top(parsed, None, set(), 3, count=True) is not None
    assert ScoreCache(searchers[-2], segments=shared).top(parsed, None, set(), 3, count=True) is not None  # kept now
    top = ScoreCache(searchers[-1], segments=shared).top(parsed, None, set(), 3, count=False)
    assert top is not None
    results = searchers[-1].search(parsed, limit=3, optimize=False)
    assert [d for _, d in top[0]] == [hit.docnum for hit in results]
    assert [s for s, _ in top[0]] == pytest.approx([hit.score for hit in results], rel=1e-9)
    assert ScoreCache(searchers[-1], segments=shared).top(query.Term("text", "charlie"), None, set(), 3, False) is None


# --- a long-lived Vault ---------------------------------------------------------

QUERIES = [
    "alpha",
    "bravo charlie",
    "delta echo foxtrot",
    "What about golf and hotel?",
    "alpha alpha bravo",
    "tag:red alpha",
    "zulu",
]


def hits(vault: Vault, text: str, **options: Any) -> list[tuple[str, float]]:
    return [(h.memory.key, h.score) for h in vault.search(text, limit=1000, **options)]


@pytest.fixture
def plain_postings(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Call a function under MEMFILE_PLAIN=segment_postings (the plain path of this trick alone)."""
    yield under_plain(monkeypatch, "segment_postings")


def assert_same_as_plain_and_fresh(vault: Vault, plain_postings: Any) -> None:
    """The long-lived Vault's hits are the plain path's (to the bit) and a fresh Vault's first search's."""
    other = Vault.open(vault.root, "michael")  # its own searcher, under the plain path
    try:
        for text in QUERIES:
            for options in ({}, {"include_superseded": True}):
                got = hits(vault, text, **options)
                assert got == plain_postings(hits, other, text, **options), text
                assert_close(got, first_search(vault.root, text, **options))
    finally:
        other.close()


def assert_close(got: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    """Same memories and scores (Whoosh adds a query's words in another order: the last bits may differ),
    in the same order but for such ties."""
    assert len(got) == len(expected)
    assert sorted(k for k, _ in got) == sorted(k for k, _ in expected)
    for (key, score), (want_key, want_score) in zip(got, expected):
        assert score == pytest.approx(want_score, rel=1e-9)
        if key != want_key:
            assert abs(score - want_score) < 1e-9 * max(1.0, abs(score))


def test_a_long_lived_vault_searches_as_the_plain_path_and_a_fresh_vault(vault: Vault, plain_postings: Any) -> None:
    r = random.Random(23)
    keys: list[str] = []
    random_changes(vault, r, 25, keys)
    assert_same_as_plain_and_fresh(vault, plain_postings)
    for _ in range(3):  # a few stores between searches: each a new segment, with deletions in old ones
        random_changes(vault, r, 3, keys)
        assert_same_as_plain_and_fresh(vault, plain_postings)
    random_changes(vault, r, 12, keys)  # small segments pile up: Whoosh merges them
    assert_same_as_plain_and_fresh(vault, plain_postings)
    vault.reindex()  # a new index, one segment of new id
    assert_same_as_plain_and_fresh(vault, plain_postings)
    random_changes(vault, r, 2, keys)
    assert_same_as_plain_and_fresh(vault, plain_postings)


def segment_ids(vault: Vault) -> set[str]:
    store = vault._index.store
    assert store is not None and store._searcher is not None
    return {sub.reader().segment().segment_id() for sub, _ in store._searcher.leaf_searchers()}


@pytest.mark.skipif(plain("segment_postings"), reason="tests the trick itself: MEMFILE_PLAIN turns it off")
def test_a_search_right_after_a_store_decodes_only_the_new_segments(vault: Vault) -> None:
    r = random.Random(3)
    for n in range(12):
        vault.store("note", f"m{n:02d}", body(r))
    kept = score_cache.SEGMENTS.postings
    vault.search("alpha bravo")
    seen = segment_ids(vault)
    for n in range(8):  # overwrites and new keys; some commits merge small segments into a new one
        vault.store("note", f"m{r.randrange(20):02d}", body(r))
        before, keys = kept.decoded, set(kept._kept)
        got = hits(vault, "alpha bravo")
        ids = segment_ids(vault)
        new = ids - seen
        decoded = {key for key in set(kept._kept) - keys if len(key) == 3}  # (segment name, field, word)
        assert kept.decoded - before == len(decoded)  # nothing decoded again in place of a kept one
        assert new and {key[0][0] for key in decoded} <= new  # only the new segments' words
        seen |= ids
        assert_close(got, first_search(vault.root, "alpha bravo"))


def first_search(root: Path, text: str, **options: Any) -> list[tuple[str, float]]:
    """The hits of a fresh Vault's first search (Whoosh's own collector)."""
    fresh = Vault.open(root, "michael")
    try:
        return hits(fresh, text, **options)
    finally:
        fresh.close()


def test_plain_segment_postings_decodes_every_segment_again(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMFILE_PLAIN", "segment_postings")
    kept = score_cache.SEGMENTS.postings
    before = kept.decoded
    vault.store("note", "one", "deploy notes")
    vault.store("note", "two", "deploy notes again", supersedes="note/one")
    assert [h.memory.key for h in vault.search("deploy notes")] == ["two"]
    assert kept.decoded == before


def test_a_vault_copied_elsewhere_shares_segments_and_gives_the_same_hits(
    tmp_path: Path, vault: Vault, plain_postings: Any
) -> None:
    """A copied index holds the same segments (ids and documents): what one copy decoded serves the other."""
    r = random.Random(9)
    for n in range(10):
        vault.store("note", f"m{n:02d}", body(r))
    hits(vault, "alpha charlie")
    copy = tmp_path / "copy"
    shutil.copytree(vault.root, copy)
    other = Vault.open(copy, "michael")
    try:
        for step in range(2):
            for root, searched in ((copy, other), (vault.root, vault)):
                got = hits(searched, "alpha charlie")
                assert_close(got, first_search(root, "alpha charlie"))
                again = Vault.open(root, "michael")
                try:
                    assert got == plain_postings(hits, again, "alpha charlie")
                finally:
                    again.close()
            if step == 0:  # the copy's searcher reads (most of) the original's segments
                assert segment_ids(other) & segment_ids(vault)
            other.store("note", "m03", "alpha alpha alpha")  # the copies part: each its own new segment
            vault.store("note", "m04", "charlie")
    finally:
        other.close()


def test_indexes_whose_segments_got_the_same_random_ids_never_share_what_is_kept(tmp_path: Path) -> None:
    """Whoosh draws segment ids from the global `random`: a process that seeds it again (an eval harness,
    Hypothesis) makes segments of the same ids in another index. Their postings and hidden sets are
    never served for each other."""
    import random

    a, b = Vault.init(tmp_path / "a", "michael"), Vault.init(tmp_path / "b", "michael")
    try:
        random.seed(7)
        a.store("note", "one", "alpha bravo charlie delta")
        a.store("note", "gone", "alpha words", expires="2000-01-01")  # hidden in a: expired
        a.search("alpha")
        random.seed(7)
        b.store("note", "one", "alpha alpha")
        b.store("note", "gone", "alpha words")  # live in b
        ids = [
            [sub.reader().segment().segment_id() for sub, _ in v._index.store._searcher.leaf_searchers()]  # type: ignore[union-attr]
            for v in (a, b)
            if v.search("alpha") is not None
        ]
        assert ids[0] == ids[1]  # the same ids, really
        fresh = Vault.open(tmp_path / "b", "michael")
        try:
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("MEMFILE_PLAIN", "1")
                plain_hits = [(h.memory.key, h.score) for h in fresh.search("alpha")]
        finally:
            fresh.close()
        assert [(h.memory.key, h.score) for h in b.search("alpha")] == plain_hits
        assert {h.memory.key for h in b.search("alpha")} == {"one", "gone"}
    finally:
        a.close()
        b.close()
