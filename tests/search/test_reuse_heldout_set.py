"""Answer reuse's held-out half (bench/reuse_pairs_heldout.json): the shape of the labelled set
(tests/search/test_reuse_set.py), other tickets and other questions, so that it measures what
tuning on the first half did not see."""

from __future__ import annotations

import json
from pathlib import Path

from tests.search.test_reuse_set import pairs as tuned_pairs

HELDOUT = Path(__file__).resolve().parent.parent.parent / "bench" / "reuse_pairs_heldout.json"


def pairs() -> list[dict]:
    return json.loads(HELDOUT.read_text())["pairs"]


def test_the_held_out_half_is_large_balanced_and_hard():
    rows = pairs()
    same = [p for p in rows if p["same"]]
    hard = [p for p in rows if p.get("hard")]
    assert len(rows) >= 80
    assert 0.4 <= len(same) / len(rows) <= 0.6
    assert len(hard) >= 20
    assert not any(p["same"] for p in hard)
    assert all(p["a"] != p["b"] and p["ticket"] for p in rows)
    assert len({p["ticket"] for p in rows}) >= 12
    assert len({(p["a"], p["b"]) for p in rows}) == len(rows)


def test_it_shares_no_ticket_or_question_with_the_tuned_half():
    tuned, held = tuned_pairs(), pairs()
    assert not {p["ticket"] for p in tuned} & {p["ticket"] for p in held}
    tuned_questions = {p["a"] for p in tuned} | {p["b"] for p in tuned}
    assert not tuned_questions & ({p["a"] for p in held} | {p["b"] for p in held})
