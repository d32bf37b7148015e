"""Reciprocal rank fusion: each ranking adds 1 / (k + rank) to the documents it ranks."""

from __future__ import annotations

RRF_K = 60


def reciprocal_rank_fusion(rankings: list[list[int]], *, k: int = RRF_K) -> list[tuple[int, float]]:
    """Ids with their fused score, best first; 1.0 is first in every ranking."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank)
    best = len(rankings) / (k + 1) if rankings else 1.0
    # Ties keep the order of first appearance (dicts keep insertion order; sorted is stable).
    return sorted(((doc_id, score / best) for doc_id, score in scores.items()), key=lambda pair: -pair[1])
