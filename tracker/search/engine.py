"""Hybrid search (docs/search.md): an exact key first, then lexical and semantic rankings fused by RRF.

One organization's documents per search: the read of its search head (and of
the documents written since the process last looked), one full-text
query, and one call of the embedding backend for the query (unless it is
one of the last few hundred asked).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt

from tracker.search.embeddings import embedding_backend
from tracker.search.fusion import Ranking, reciprocal_rank_fusion
from tracker.search.lexical import lexical_rank
from tracker.search.query import parse_query, snippet
from tracker.search.semantic import semantic_rank
from tracker.search.store import CachedDocument, OrganizationIndex, organization_index
from tracker.search.types import ITEM, KNOWLEDGE, Mode, SearchHit, SearchScope

CANDIDATES = 50  # from each ranking, before fusion
QUERY_VECTORS = 256  # recent queries' embeddings kept per process


def search(*, scope: SearchScope, query: str, limit: int = 10, mode: Mode = "hybrid") -> list[SearchHit]:
    """The documents of ``scope`` that best answer ``query``, best first."""
    parsed = parse_query(query)
    if parsed.is_empty or not scope.kinds or limit < 1:
        return []
    backend = embedding_backend()
    index = organization_index(scope.organization_id, backend.name)
    if index.epoch is None:  # nothing of the organization was ever indexed
        return []
    exact = [] if mode == "semantic" else _exact(index, scope, parsed.identifiers)
    if exact:
        parsed = parse_query(query, drop=frozenset(doc.key for doc in exact))
    rankings: list[Ranking] = []
    if mode != "semantic":
        rankings.append(Ranking(lexical_rank(scope=scope, query=parsed, limit=CANDIDATES)))
    if mode != "lexical" and parsed.groups:
        vector = query_vector(backend.name, parsed.natural or parsed.text)
        semantic = semantic_rank(
            index=index, scope=scope, vector=vector, limit=CANDIDATES, excluded=parsed.excluded
        )
        rankings.append(Ranking(semantic))
    ranked = [(doc.id, 1.0) for doc in exact] + reciprocal_rank_fusion(rankings)
    return _hits(index, scope, ranked, parsed.words, limit)


@lru_cache(maxsize=QUERY_VECTORS)
def query_vector(model: str, text: str) -> npt.NDArray[np.float32]:
    """The query's embedding; a planner asks the same question again, and a model call costs milliseconds."""
    backend = embedding_backend()
    assert backend.name == model
    vector = backend.embed([text])[0]
    vector.setflags(write=False)
    return vector


def _exact(
    index: OrganizationIndex, scope: SearchScope, identifiers: tuple[str, ...]
) -> list[CachedDocument]:
    found = (index.by_key(scope, key) for key in identifiers)
    return [doc for doc in found if doc is not None and doc.kind == ITEM]


def _hits(
    index: OrganizationIndex,
    scope: SearchScope,
    ranked: list[tuple[int, float]],
    words: tuple[str, ...],
    limit: int,
) -> list[SearchHit]:
    hits: list[SearchHit] = []
    seen: set[int] = set()
    for doc_id, score in ranked:
        doc = index.documents.get(doc_id)  # None: written after this process last looked
        if doc is None or doc_id in seen or index.shadows(doc, scope):
            continue
        seen.add(doc_id)
        hits.append(_hit(doc, score, words))
        if len(hits) == limit:
            break
    return hits


def _hit(doc: CachedDocument, score: float, words: tuple[str, ...]) -> SearchHit:
    return SearchHit(
        kind=doc.kind,
        key=doc.key,
        title=doc.title,
        snippet=snippet(doc.body or doc.title, words),
        score=round(score, 6),
        state=doc.state if doc.kind == ITEM else doc.subkind if doc.kind == KNOWLEDGE else None,
        subkind=doc.subkind or None,
    )
