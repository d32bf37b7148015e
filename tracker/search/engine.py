"""Hybrid search (docs/search.md): an exact key first, then lexical and semantic rankings fused by RRF,
each hit then judged a match, related or nothing on its own evidence (:mod:`tracker.search.evidence`).

One organization's documents per search: the read of its search head (and of
the documents written since the process last looked), one full-text
query, and one call of the embedding backend for the query (unless it is
one of the last few hundred asked).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from tracker.search.embeddings import embedding_backend
from tracker.search.evidence import Evidence, Standing, standing, title_has
from tracker.search.fusion import Ranking, reciprocal_rank_fusion
from tracker.search.lexical import lexical_rank
from tracker.search.query import parse_query, snippet
from tracker.search.semantic import semantic_rank
from tracker.search.store import CachedDocument, OrganizationIndex, organization_index
from tracker.search.types import ITEM, KNOWLEDGE, Mode, SearchHit, SearchScope

CANDIDATES = 50  # from each ranking, before fusion
JUDGED = 3  # of the fused list, the first ``JUDGED * limit`` documents are judged: cut ones leave room
QUERY_VECTORS = 256  # recent queries' embeddings kept per process


def search(*, scope: SearchScope, query: str, limit: int = 10, mode: Mode = "hybrid") -> list[SearchHit]:
    """The documents of ``scope`` that best answer ``query``: its matches best first, then the hits
    only related to it (``related``), ``limit`` in all."""
    return [hit for hit, _ in judged(scope=scope, query=query, limit=limit, mode=mode)]


def judged(
    *, scope: SearchScope, query: str, limit: int = 10, mode: Mode = "hybrid"
) -> list[tuple[SearchHit, Evidence]]:
    """:func:`search`'s hits with the evidence each was judged on (benchmarks read it)."""
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
    lexical: list[int] = []
    if mode != "semantic":
        lexical = lexical_rank(scope=scope, query=parsed, limit=CANDIDATES)
        rankings.append(Ranking(lexical))
    vector = None
    if mode != "lexical" and parsed.groups:
        vector = query_vector(backend.name, parsed.natural or parsed.text)
        semantic = semantic_rank(
            index=index, scope=scope, vector=vector, limit=CANDIDATES, excluded=parsed.excluded
        )
        rankings.append(Ranking(semantic))
    ranked = [(doc.id, 1.0) for doc in exact] + reciprocal_rank_fusion(rankings)
    found = _Found(exact={doc.id for doc in exact}, lexical=set(lexical), vector=vector, words=parsed.words)
    return _hits(index, scope, ranked, found, limit)


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


@dataclass(frozen=True)
class _Found:
    exact: set[int]
    lexical: set[int]
    vector: npt.NDArray[np.float32] | None
    words: tuple[str, ...]

    def evidence(self, index: OrganizationIndex, doc: CachedDocument) -> Evidence:
        stored = index.vectors.get(doc.id)
        similarity = None if self.vector is None or stored is None else float(stored @ self.vector)
        return Evidence(
            exact=doc.id in self.exact,
            lexical=doc.id in self.lexical,
            in_title=title_has(doc.title, self.words),
            similarity=similarity,
        )


def _hits(
    index: OrganizationIndex,
    scope: SearchScope,
    ranked: list[tuple[int, float]],
    found: _Found,
    limit: int,
) -> list[tuple[SearchHit, Evidence]]:
    """The fused list's first documents, judged: the matches in their order, then the related ones.
    Only documents the caller's scope sees, and at most a few times ``limit`` of them, are judged."""
    candidates: list[tuple[CachedDocument, float, Evidence]] = []
    seen: set[int] = set()
    for doc_id, score in ranked:
        doc = index.documents.get(doc_id)  # None: written after this process last looked
        if doc is None or doc_id in seen or index.shadows(doc, scope):
            continue
        seen.add(doc_id)
        candidates.append((doc, score, found.evidence(index, doc)))
        if len(candidates) == limit * JUDGED:
            break
    similarities = [e.similarity for _, _, e in candidates if e.similarity is not None]
    best = max(similarities, default=None)
    matches: list[tuple[SearchHit, Evidence]] = []
    related: list[tuple[SearchHit, Evidence]] = []
    for doc, score, evidence in candidates:
        kept = standing(evidence, best_similarity=best, named=bool(found.exact), words=len(found.words))
        if kept is Standing.MATCH and len(matches) < limit:
            matches.append((_hit(doc, score, found.words), evidence))
        elif kept is Standing.RELATED and len(related) < limit:
            related.append((_hit(doc, score, found.words, related=True), evidence))
    return (matches + related)[:limit]


def _hit(doc: CachedDocument, score: float, words: tuple[str, ...], *, related: bool = False) -> SearchHit:
    return SearchHit(
        kind=doc.kind,
        key=doc.key,
        title=doc.title,
        snippet=snippet(doc.body or doc.title, words),
        score=round(score, 6),
        state=doc.state if doc.kind == ITEM else doc.subkind if doc.kind == KNOWLEDGE else None,
        subkind=doc.subkind or None,
        related=related,
    )
