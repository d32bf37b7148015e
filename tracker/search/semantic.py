"""Semantic ranking: cosine similarity of the query's vector with every cached document's."""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from tracker.search.query import WORD, Term
from tracker.search.store import CachedDocument, OrganizationIndex
from tracker.search.types import SearchScope

# all-MiniLM-L6-v2 puts unrelated texts below about 0.2; a search is no list of everything.
MIN_SIMILARITY = 0.2


def _mentions(doc: CachedDocument, terms: tuple[Term, ...]) -> bool:
    words = set(WORD.findall(f"{doc.title} {doc.body}".lower()))
    return any(all(word in words for word in term) for term in terms)


@cache
def _single_threaded_blas() -> None:
    """One BLAS thread in this process: after each product numpy's idle BLAS threads spin for a
    while, and on a small machine they take the core the embedding model needs next (measured:
    semantic search p50 12 ms with one thread, 16 ms with two, p99 26 ms against 54 ms)."""
    threadpool_limits(limits=1, user_api="blas")


def semantic_rank(
    *,
    index: OrganizationIndex,
    scope: SearchScope,
    vector: npt.NDArray[np.float32],
    limit: int,
    excluded: tuple[Term, ...] = (),
    min_similarity: float = MIN_SIMILARITY,
) -> list[int]:
    """Ids of the documents in ``scope`` most similar to ``vector``, best first."""
    _single_threaded_blas()
    ids, matrix = index.matrix()
    if not len(ids) or matrix.shape[1] != vector.shape[0]:
        return []
    similarities = matrix @ vector
    ranked: list[int] = []
    for position in np.argsort(-similarities, kind="stable"):
        if similarities[position] < min_similarity or len(ranked) >= limit:
            break
        doc = index.documents[int(ids[position])]
        if doc.in_scope(scope) and not (excluded and _mentions(doc, excluded)):
            ranked.append(doc.id)
    return ranked
