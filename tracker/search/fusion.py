"""Reciprocal rank fusion: each ranking adds weight / (k + rank) to the documents it ranks."""

from __future__ import annotations

from dataclasses import dataclass

RRF_K = 60


@dataclass(frozen=True)
class Ranking:
    ids: list[int]
    weight: float = 1.0


def reciprocal_rank_fusion(rankings: list[Ranking], *, k: int = RRF_K) -> list[tuple[int, float]]:
    """Ids with their fused score, best first; 1.0 is first in every ranking."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking.ids, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + ranking.weight / (k + rank)
    best = sum(ranking.weight for ranking in rankings) / (k + 1) or 1.0
    # Ties keep the order of first appearance (dicts keep insertion order; sorted is stable).
    return sorted(((doc_id, score / best) for doc_id, score in scores.items()), key=lambda pair: -pair[1])
