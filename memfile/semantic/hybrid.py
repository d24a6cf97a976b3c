"""Hybrid search: memfile's lexical hits fused with a dense ranking of the same candidates.

The caller (`Vault.search(..., semantic=True)`) runs the lexical search as always, deeper, and
passes its hits with the memories that pass the same filters (category, tags, priority, source,
expiry, superseded; this mind only). Only those candidates are ranked by cosine, so a filtered-out
memory can never come back through its vector. Both rankings are fused by weighted reciprocal
rank: `score = w_lex / (k + lexical rank) + w_dense / (k + dense rank)`.

A memory without a vector yet is still found lexically; a hit found only by meaning shows its
first line as snippet. Each `FusedHit` says its parts (lexical rank, dense rank, cosine).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..model import Memory, SearchHit
from .cache import VectorCache, script_of
from .embedders import Embedder, _require
from .vectors import DEPTH

SNIPPET_CHARS = 200


@dataclass(frozen=True)
class HybridParams:
    """How the two rankings are fused (defaults tuned on the probe set's tune half; docs/semantic.md).

    k: the reciprocal-rank constant. lexical_weight / dense_weight: each ranking's weight.
    depth: hits each ranking brings. centre: when to rank by cosines taken after removing each
    script's mean vector (VectorCache.centred): "never", "always", or "foreign" (for a question
    written in Thai or Vietnamese letters only). min_cosine: a hit found only by meaning needs at least this
    (raw) cosine; e5's cosines of unrelated texts sit around 0.7-0.8, so 0 keeps them all.
    """

    k: int = 10
    lexical_weight: float = 1.0
    dense_weight: float = 1.0
    depth: int = DEPTH
    centre: str = "foreign"
    min_cosine: float = 0.0


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


#: Vietnamese pronouns and function words, accent-folded. memfile's index has English stop words
#: only, so "cô ấy" or "của" match every Vietnamese memory; a hybrid search leaves them out of its
#: lexical half (the dense half reads the whole question).
VIETNAMESE_STOP = frozenset(
    """anh ay chi co em ong ba toi ban ho no cua la gi nao o duoc nhung cac mot cho voi nay do ai khi
bao nhieu thi ma dau sao khong vay ra the nhu va hay da dang se bi""".split()
)


def lexical_query(query: str) -> str:
    """The question for the lexical half of a hybrid search: a Vietnamese one without its function words.

    Only a question written with Vietnamese letters is touched (unaccented Vietnamese cannot be
    told from English words such as "the" or "do" this way); an empty result means "skip the
    lexical half".
    """
    if script_of(query) != "vi":
        return query
    return " ".join(word for word in query.split() if _fold(word.strip("?!.,;:\"'()")) not in VIETNAMESE_STOP)


def _fold(word: str) -> str:
    import unicodedata

    decomposed = unicodedata.normalize("NFKD", word.lower().replace("đ", "d"))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


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
    """The fused hits, best first, at most `limit`.

    Args:
        lexical: the lexical hits, best first, already filtered (as deep as `params.depth`).
        candidates: every memory that passes the same filters; only these are ranked by cosine.
        cache: the mind's vectors (memories without one are simply not ranked by meaning).
        query_vector: the question's vector (`QueryVectors.get` or `embedder.embed_query`).
        question: the question's text (its script decides `params.centre == "foreign"`).
        limit: the most hits to return.
    """
    np = _require("numpy")
    centre = params.centre == "always" or (params.centre == "foreign" and script_of(question) != "other")
    raw, ranking, kept = cache.scores(candidates, query_vector, centre=centre)
    top = min(params.depth, len(kept))
    order: list[int] = []
    if top:
        picked = np.argpartition(-ranking, top - 1)[:top] if top < len(kept) else np.arange(len(kept))
        order = sorted(picked.tolist(), key=lambda i: (-float(ranking[i]), kept[i].path))
    cosine = {kept[i].path: float(raw[i]) for i in range(len(kept))}
    dense_rank = {kept[i].path: rank for rank, i in enumerate(order, 1)}
    lexical_rank: dict[str, int] = {}
    by_path: dict[str, tuple[Memory, str]] = {}
    for rank, hit in enumerate(lexical[: params.depth], 1):
        lexical_rank.setdefault(hit.memory.path, rank)
        by_path.setdefault(hit.memory.path, (hit.memory, hit.snippet))
    for i in order:
        memory = kept[i]
        if memory.path not in by_path and cosine[memory.path] >= params.min_cosine:
            by_path[memory.path] = (memory, first_line(memory))
    scored = []
    for path, (memory, snippet) in by_path.items():
        lex, dense = lexical_rank.get(path), dense_rank.get(path)
        score = (params.lexical_weight / (params.k + lex) if lex else 0.0) + (
            params.dense_weight / (params.k + dense) if dense else 0.0
        )
        scored.append((score, min(lex or 10**9, dense or 10**9), path, memory, snippet, lex, dense))
    scored.sort(key=lambda s: (-s[0], s[1], s[2]))
    return [
        FusedHit(memory, score, snippet, rank, lex, dense, cosine.get(path))
        for rank, (score, _, path, memory, snippet, lex, dense) in enumerate(scored[:limit], 1)
    ]


class QueryVectors:
    """Question -> vector, remembering the last `size` questions (for long-lived processes). Thread-safe."""

    def __init__(self, embedder: Embedder, size: int = 256) -> None:
        self.embedder = embedder
        self.size = size
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, query: str) -> Any:
        """The question's vector (embedded once, then served from memory)."""
        with self._lock:
            found = self._cache.get(query)
            if found is not None:
                self._cache.move_to_end(query)
                return found
        vector = self.embedder.embed_query(query)
        vector.setflags(write=False)
        with self._lock:
            self._cache[query] = vector
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return vector
