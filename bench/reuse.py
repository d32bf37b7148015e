"""Answer reuse: how well "means the same" is told apart from "a different question about the same
ticket" (docs/benchmarks.md#answer-reuse, docs/domain.md#agents-questions).

The labelled set ``bench/reuse_pairs.json`` holds pairs of questions about one ticket: ``same``
true when the second only rewords the first (its earlier answer should be reused), false when it
asks something else (many share most of their words: ``hard``). Both are embedded with the local
model (all-MiniLM-L6-v2, offline), as asking does; a pair is "reused" when the cosine of the two
vectors reaches the threshold. Prints precision and recall of "reused" at the default threshold
(``[questions] reuse_threshold``, ``ballet/env.py``) and a table over thresholds.

    .venv/bin/python bench/reuse.py
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PAIRS = ROOT / "bench" / "reuse_pairs.json"
THRESHOLDS = (0.70, 0.75, 0.78, 0.80, 0.82, 0.84, 0.85, 0.86, 0.88, 0.90, 0.92, 0.95)


def figures(similarities: np.ndarray, same: np.ndarray, threshold: float) -> tuple[float, float, int, int]:
    """Precision and recall of "reused" at ``threshold``, the true and the false reuses."""
    reused = similarities >= threshold
    true = int((reused & same).sum())
    false = int((reused & ~same).sum())
    precision = true / (true + false) if true + false else 1.0
    recall = true / int(same.sum()) if same.any() else 1.0
    return precision, recall, true, false


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ballet.settings.base")
    import django

    django.setup()  # the search package's models load with the backend; no database is touched
    from ballet.env import WorkConfig
    from planner.services.answer_reuse import MAX_CANDIDATES
    from tracker.search.embeddings import LocalModelBackend

    pairs = json.loads(PAIRS.read_text())["pairs"]
    model = LocalModelBackend()
    started = time.perf_counter()
    first = model.embed([p["a"] for p in pairs])
    second = model.embed([p["b"] for p in pairs])
    elapsed = time.perf_counter() - started
    similarities = (first * second).sum(axis=1)
    same = np.array([p["same"] for p in pairs])
    hard = np.array([bool(p.get("hard")) for p in pairs])
    default = WorkConfig().reuse_threshold
    print(
        f"{len(pairs)} pairs: {int(same.sum())} same meaning, {int((~same).sum())} different "
        f"({int(hard.sum())} hard); {model.name}, {1000 * elapsed / (2 * len(pairs)):.1f} ms a question"
    )
    precision, recall, true, false = figures(similarities, same, default)
    print(
        f"default threshold {default}: precision {precision:.3f}, recall {recall:.3f} "
        f"({true} true reuses, {false} false)\n"
    )
    print("threshold  precision  recall  reused  false  hard-false")
    for threshold in sorted({*THRESHOLDS, default}):
        precision, recall, true, false = figures(similarities, same, threshold)
        hard_false = int(((similarities >= threshold) & hard).sum())
        row = f"{threshold:9.2f}  {precision:9.3f}  {recall:6.3f}  {true + false:6d}  {false:5d}"
        print(f"{row}  {hard_false:10d}")
    stored = np.tile(second, (MAX_CANDIDATES // len(pairs) + 1, 1))[:MAX_CANDIDATES]
    started = time.perf_counter()
    for _ in range(200):
        int(np.argmax(stored @ first[0]))
    compare = (time.perf_counter() - started) / 200
    print(f"\ncomparing one question with {MAX_CANDIDATES} answered ones: {1e6 * compare:.0f} µs")
    print("\nclosest different pairs:")
    for i in np.argsort(-np.where(same, -1, similarities))[:5]:
        print(f"  {similarities[i]:.3f}  {pairs[i]['a']!r} / {pairs[i]['b']!r}")
    print("farthest same pairs:")
    for i in np.argsort(np.where(same, similarities, 2))[:5]:
        print(f"  {similarities[i]:.3f}  {pairs[i]['a']!r} / {pairs[i]['b']!r}")


if __name__ == "__main__":
    main()
