"""The dense half of a hybrid search, and the fusion of rankings: pure functions over numpy arrays.

`dense_top` ranks stored vectors by cosine to a query vector; `fuse_rrf` merges any number of
rankings by reciprocal rank (score = sum of 1 / (k + rank)), which needs no calibration between
BM25F scores and cosines. Both are what `Vault.search(..., semantic=True)` needs once vectors are
cached; the cache itself (rows keyed by content hash under `.memfile/`) is the next step.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any, TypeVar

#: The fusion constant, tuned on LoCoMo conversations 0-4 and held on 5-9 (design note, section 3.2).
RRF_K = 10
#: How many hits each half contributes before fusion.
DEPTH = 50

T = TypeVar("T", bound=Hashable)


def dense_top(matrix: Any, query: Any, top: int = DEPTH) -> list[tuple[int, float]]:
    """The `top` rows of `matrix` nearest `query` by cosine, best first, as (row, cosine).

    Both are L2-normalised float32 (as an `Embedder` returns them), so the dot product is the cosine.
    Ties keep row order, so the result is deterministic.
    """
    import numpy as np

    if top <= 0 or len(matrix) == 0:
        return []
    scores = matrix @ query
    top = min(top, len(scores))
    if top < len(scores):
        candidates = np.argpartition(-scores, top - 1)[:top]
    else:
        candidates = np.arange(len(scores))
    order = sorted(candidates.tolist(), key=lambda row: (-float(scores[row]), row))
    return [(row, float(scores[row])) for row in order]


def fuse_rrf(rankings: Iterable[Sequence[T]], k: int = RRF_K) -> list[tuple[T, float]]:
    """Reciprocal rank fusion: items of several best-first lists, by the sum of 1 / (k + rank), best first.

    Rank 1 is the best. An item missing from a list adds nothing for it. A tie goes to the item
    with the better single rank, then to the one from the earlier list: the order is deterministic.
    """
    scores: dict[T, float] = {}
    best: dict[T, tuple[int, int]] = {}
    for which, ranking in enumerate(rankings):
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
            best[item] = min(best.get(item, (rank, which)), (rank, which))
    return sorted(scores.items(), key=lambda pair: (-pair[1], best[pair[0]]))
