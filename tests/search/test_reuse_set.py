"""Answer reuse's labelled set (bench/reuse_pairs.json, docs/benchmarks.md#answer-reuse): what it
holds, and how well the real model tells "the same question reworded" from "another question about
the same ticket" at the default threshold. A quality bar, not a timing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ballet.env import WorkConfig

PAIRS = Path(__file__).resolve().parent.parent.parent / "bench" / "reuse_pairs.json"


def pairs() -> list[dict]:
    return json.loads(PAIRS.read_text())["pairs"]


def figures(model, threshold: float) -> tuple[float, float]:
    """Precision and recall of "reused" (cosine at or above ``threshold``) on the labelled set."""
    rows = pairs()
    similarities = (model.embed([p["a"] for p in rows]) * model.embed([p["b"] for p in rows])).sum(axis=1)
    same = np.array([p["same"] for p in rows])
    reused = similarities >= threshold
    true, false = int((reused & same).sum()), int((reused & ~same).sum())
    return (true / (true + false) if true + false else 1.0), true / int(same.sum())


def test_the_set_is_large_balanced_and_hard():
    rows = pairs()
    same = [p for p in rows if p["same"]]
    hard = [p for p in rows if p.get("hard")]
    assert len(rows) >= 80
    assert 0.4 <= len(same) / len(rows) <= 0.6
    assert len(hard) >= 20
    assert not any(p["same"] for p in hard)
    assert all(p["a"] != p["b"] and p["ticket"] for p in rows)


def test_at_the_default_threshold_a_reused_answer_is_almost_always_right(real_model):
    precision, recall = figures(real_model, WorkConfig().reuse_threshold)
    assert precision >= 0.95
    assert recall > 0  # it still reuses: near-verbatim repeats
