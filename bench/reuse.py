"""Answer reuse: how well "means the same" is told apart from "a different question about the same
ticket" (docs/benchmarks.md#answer-reuse, docs/domain.md#agents-questions).

The labelled set ``bench/reuse_pairs.json`` holds pairs of questions about one ticket: ``same``
true when the second only rewords the first (its earlier answer should be reused), false when it
asks something else (many share most of their words: ``hard``). Both are embedded with the local
model (all-MiniLM-L6-v2, offline), as asking does; a pair is "reused" when the cosine of the two
vectors reaches the threshold. Prints precision and recall of "reused" at the default threshold
(``[questions] reuse_threshold``, ``ballet/env.py``) and a table over thresholds.

Then the residual rule, tried and not adopted (docs/benchmarks.md#answer-reuse): besides the
cosine, the words one question has and the other lacks (content words, stop words, question words
and filler verbs removed, lightly stemmed) are embedded on each side and compared; reused when the
cosine reaches a high bar, or a lower bar with residuals alike, or a middle bar with no residual on
either side. Its four constants are chosen on one half of the tickets and measured on the other
half (both ways round) and on the whole set.

``bench/reuse_pairs_heldout.json`` is a held-out half in the same format, written after the
threshold and the rules were chosen (a clinic's booking tool, other tickets): measure on it, never
tune on it. ``--pairs FILE`` runs all of the above on another file; ``--both`` prints the table
over thresholds for the labelled set and the held-out half side by side.

``--judge`` measures the reuse judge (``planner/domain/services/reuse_judge.py``): the pairs at or
above ``reuse_judge_floor`` and below the threshold are the ones a judge is shown (the first
question as the answered one, the second as the new one); without a key it prints how many
rewordings reach the floor (the most the judge can reuse) and how many different questions it must
turn down; with ``ANTHROPIC_API_KEY`` set (``ANTHROPIC_BASE_URL`` honoured) it asks the title model
(``BALLET_PLANNER_TITLE_MODEL``) for each and prints precision and recall of threshold and judge
together.

    .venv/bin/python bench/reuse.py
    .venv/bin/python bench/reuse.py --pairs bench/reuse_pairs_heldout.json
    .venv/bin/python bench/reuse.py --both
    .venv/bin/python bench/reuse.py --judge [--pairs bench/reuse_pairs_heldout.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PAIRS = ROOT / "bench" / "reuse_pairs.json"
HELDOUT = ROOT / "bench" / "reuse_pairs_heldout.json"
THRESHOLDS = (0.70, 0.75, 0.78, 0.80, 0.82, 0.84, 0.85, 0.86, 0.88, 0.90, 0.92, 0.95)
# The residual rule's words: what a question asks with, not about.
QUESTION_WORDS = frozenset(
    """what which who whom whose when where why how whether should would could can may might must shall
    will do does did is are was were be we us our you your i it there""".split()  # noqa: SIM905
)
FILLER = frozenset(
    """use used using need needs needed keep go goes take also well allowed way ok okay able required
    include includes contain contains want get make too""".split()  # noqa: SIM905
)
# The residual rule's grid: (high bar, lower bar, residual bar, no-residual bar); the high bar stays 0.90.
GRID = tuple(
    itertools.product(
        (0.90,),
        (0.60, 0.65, 0.70, 0.75, 0.80),
        (0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.60),
        (0.70, 0.75, 0.80, 0.85),
    )
)


def figures(similarities: np.ndarray, same: np.ndarray, threshold: float) -> tuple[float, float, int, int]:
    """Precision and recall of "reused" at ``threshold``, the true and the false reuses."""
    reused = similarities >= threshold
    true = int((reused & same).sum())
    false = int((reused & ~same).sum())
    precision = true / (true + false) if true + false else 1.0
    recall = true / int(same.sum()) if same.any() else 1.0
    return precision, recall, true, false


@dataclass(frozen=True)
class Pair:
    cosine: float
    residual: float | None  # the residual texts' cosine; None: a residual on one side only, or none
    sides: int  # how many sides have residual words: 0, 1 or 2
    same: bool
    half: int  # the tickets, alternately, in order of first appearance


def residual_words(first: str, second: str) -> tuple[list[str], list[str]]:
    """The content words of each question whose stem the other lacks."""
    from tracker.search.query import STOP_WORDS, WORD, stem

    def content(text: str) -> list[str]:
        words = (w.lower() for w in WORD.findall(text))
        dropped = STOP_WORDS | QUESTION_WORDS | FILLER
        return list(dict.fromkeys(w for w in words if w not in dropped))

    a, b = content(first), content(second)
    stems_a, stems_b = {stem(w) for w in a}, {stem(w) for w in b}
    return [w for w in a if stem(w) not in stems_b], [w for w in b if stem(w) not in stems_a]


def residual_pairs(model, pairs: list[dict], similarities: np.ndarray) -> list[Pair]:
    tickets = {t: i % 2 for i, t in enumerate(dict.fromkeys(p["ticket"] for p in pairs))}
    out = []
    for pair, cosine in zip(pairs, similarities, strict=True):
        a, b = residual_words(pair["a"], pair["b"])
        residual = None
        if a and b:
            va, vb = model.embed([" ".join(a), " ".join(b)])
            residual = float(va @ vb)
        sides = bool(a) + bool(b)
        out.append(Pair(float(cosine), residual, sides, bool(pair["same"]), tickets[pair["ticket"]]))
    return out


def residual_reused(pair: Pair, bars: tuple[float, float, float, float]) -> bool:
    high, low, residual, bare = bars
    if pair.cosine >= high:
        return True
    if pair.sides == 0:
        return pair.cosine >= bare
    return pair.residual is not None and pair.cosine >= low and pair.residual >= residual


def residual_figures(
    rows: list[Pair], bars: tuple[float, float, float, float]
) -> tuple[float, float, int, int]:
    reused = np.array([residual_reused(p, bars) for p in rows])
    same = np.array([p.same for p in rows])
    true, false = int((reused & same).sum()), int((reused & ~same).sum())
    return (true / (true + false) if true + false else 1.0), true / int(same.sum()), true, false


def residual_rule(model, pairs: list[dict], similarities: np.ndarray) -> None:
    """Choose the bars on one half (no false reuse there, then the most reuses, then the strictest
    bars), and measure them on the other half and on the whole set."""
    rows = residual_pairs(model, pairs, similarities)
    print("\nresidual rule (tried, not adopted): bars chosen on one half of the tickets")
    print("tuned on  high   low  resid  bare   tuned half         held-out half      whole set")
    held_true = held_false = 0
    for half in (0, 1):
        tune = [p for p in rows if p.half == half]
        held = [p for p in rows if p.half != half]

        def rank(bars: tuple[float, float, float, float], tune: list[Pair] = tune) -> tuple:
            _, recall, _, false = residual_figures(tune, bars)
            return (false == 0, recall, bars[1], bars[2], bars[3])

        bars = max(GRID, key=rank)
        cells = []
        for part in (tune, held, rows):
            precision, recall, true, false = residual_figures(part, bars)
            cells.append(f"p {precision:.3f} r {recall:.3f} ({true}/{false})")
        _, _, true, false = residual_figures(held, bars)
        held_true, held_false = held_true + true, held_false + false
        print(
            f"half {half}   {bars[0]:.2f}  {bars[1]:.2f}  {bars[2]:.2f}  {bars[3]:.2f}   " + "  ".join(cells)
        )
    same = sum(p.same for p in rows)
    print(
        f"both held-out halves together: precision {held_true / (held_true + held_false):.3f}, "
        f"recall {held_true / same:.3f} ({held_true} true reuses, {held_false} false)"
    )
    best = max(
        GRID, key=lambda bars: (residual_figures(rows, bars)[0] >= 0.95, residual_figures(rows, bars)[1])
    )
    precision, recall, true, false = residual_figures(rows, best)
    print(
        f"the best bars chosen on the whole set itself (an upper bound): {best}, "
        f"precision {precision:.3f}, recall {recall:.3f}"
    )


@dataclass(frozen=True)
class Labelled:
    """A labelled file's pairs, embedded: the cosine of each pair, its labels."""

    pairs: list[dict]
    similarities: np.ndarray
    same: np.ndarray
    hard: np.ndarray
    ms_per_question: float


def load_pairs(path: Path) -> list[dict]:
    """The pairs of a labelled file; a file that is not one says so and stops the run."""
    try:
        pairs = json.loads(path.read_text())["pairs"]
        complete = bool(pairs) and all({"a", "b", "same", "ticket"} <= set(p) for p in pairs)
    except (OSError, ValueError, KeyError, TypeError) as error:
        sys.exit(f"{path}: not a labelled set of pairs ({error.__class__.__name__}: {error})")
    if not complete:
        sys.exit(f"{path}: not a labelled set of pairs (every pair needs ticket, a, b and same)")
    return pairs


def embed_pairs(model, path: Path) -> Labelled:  # type: ignore[no-untyped-def]
    pairs = load_pairs(path)
    started = time.perf_counter()
    first = model.embed([p["a"] for p in pairs])
    second = model.embed([p["b"] for p in pairs])
    elapsed = time.perf_counter() - started
    return Labelled(
        pairs=pairs,
        similarities=(first * second).sum(axis=1),
        same=np.array([p["same"] for p in pairs]),
        hard=np.array([bool(p.get("hard")) for p in pairs]),
        ms_per_question=1000 * elapsed / (2 * len(pairs)),
    )


def summary(path: Path, data: Labelled, default: float, model_name: str) -> None:
    same, hard = data.same, data.hard
    print(
        f"{path.name}: {len(data.pairs)} pairs: {int(same.sum())} same meaning, {int((~same).sum())} "
        f"different ({int(hard.sum())} hard); {model_name}, {data.ms_per_question:.1f} ms a question"
    )
    precision, recall, true, false = figures(data.similarities, same, default)
    print(
        f"default threshold {default}: precision {precision:.3f}, recall {recall:.3f} "
        f"({true} true reuses, {false} false)\n"
    )


def side_by_side(model, default: float) -> None:  # type: ignore[no-untyped-def]
    """The table over thresholds for the labelled set and its held-out half, one beside the other."""
    sets = [(path, embed_pairs(model, path)) for path in (PAIRS, HELDOUT)]
    for path, data in sets:
        summary(path, data, default, model.name)
    print(" " * 11 + "".join(f"{path.name:<38}" for path, _ in sets))
    print("threshold  " + "precision  recall  reused  false  hard  " * len(sets))
    for threshold in sorted({*THRESHOLDS, default}):
        row = f"{threshold:9.2f}  "
        for _, data in sets:
            precision, recall, true, false = figures(data.similarities, data.same, threshold)
            hard_false = int(((data.similarities >= threshold) & data.hard).sum())
            row += f"{precision:9.3f}  {recall:6.3f}  {true + false:6d}  {false:5d}  {hard_false:4d}  "
        print(row.rstrip())


def judge_figures(data: Labelled, threshold: float, floor: float) -> None:
    """The reuse judge on ``data``: the bound without a key, the figures with one."""
    from planner.domain.services.reuse_judge import JUDGE_SYSTEM, JudgeCall, judge_prompt, verdict_of

    shown = (data.similarities >= floor) & (data.similarities < threshold)
    above = data.similarities >= threshold
    same = data.same
    bound = int(((above | shown) & same).sum()) / int(same.sum())
    rewordings = int((shown & same).sum())
    print(
        f"judge floor {floor}: {int(shown.sum())} pairs shown to the judge: {rewordings} rewordings, "
        f"{int((shown & ~same).sum())} different ({int((shown & data.hard).sum())} hard); a perfect judge "
        f"with the threshold: recall {bound:.3f}, precision 1.000"
    )
    key = os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        print("  no ANTHROPIC_API_KEY: the judge's own precision and recall need the model")
        return
    import anthropic

    from ballet.env import DEFAULT_TITLE_MODEL

    model = os.environ.get("BALLET_PLANNER_TITLE_MODEL", DEFAULT_TITLE_MODEL)
    client = anthropic.Anthropic(api_key=key)
    said = np.zeros(len(data.pairs), dtype=bool)
    started, calls = time.perf_counter(), 0
    for i in np.flatnonzero(shown):
        pair = data.pairs[i]
        reply = client.messages.create(
            model=model,
            system=JUDGE_SYSTEM,
            max_tokens=5,
            messages=[{"role": "user", "content": judge_prompt(pair["b"], [pair["a"]])}],
        )
        text = "".join(block.text for block in reply.content if block.type == "text")
        said[i] = verdict_of(text, JudgeCall(0, "", (1,))).reuse_of == 1
        calls += 1
    reused = above | said
    true, false = int((reused & same).sum()), int((reused & ~same).sum())
    precision = true / (true + false) if true + false else 1.0
    print(
        f"  {model}, {calls} calls ({1000 * (time.perf_counter() - started) / max(calls, 1):.0f} ms each): "
        f"precision {precision:.3f}, recall {true / int(same.sum()):.3f} ({true} true reuses, {false} false)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=Path, default=PAIRS, help="a labelled file (default: %(default)s)")
    parser.add_argument(
        "--both", action="store_true", help="the labelled set and the held-out half side by side"
    )
    parser.add_argument("--judge", action="store_true", help="the reuse judge on --pairs (a key: the model)")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ballet.settings.base")
    import django

    django.setup()  # the search package's models load with the backend; no database is touched
    from ballet.env import WorkConfig
    from planner.domain.services.answer_reuse import MAX_CANDIDATES
    from tracker.search.embeddings import LocalModelBackend

    model = LocalModelBackend()
    default = WorkConfig().reuse_threshold
    if args.judge:
        data = embed_pairs(model, args.pairs)
        summary(args.pairs, data, default, model.name)
        judge_figures(data, default, WorkConfig().reuse_judge_floor)
        return
    if args.both:
        side_by_side(model, default)
        return
    data = embed_pairs(model, args.pairs)
    pairs, similarities, same, hard = data.pairs, data.similarities, data.same, data.hard
    summary(args.pairs, data, default, model.name)
    print("threshold  precision  recall  reused  false  hard-false")
    for threshold in sorted({*THRESHOLDS, default}):
        precision, recall, true, false = figures(similarities, same, threshold)
        hard_false = int(((similarities >= threshold) & hard).sum())
        row = f"{threshold:9.2f}  {precision:9.3f}  {recall:6.3f}  {true + false:6d}  {false:5d}"
        print(f"{row}  {hard_false:10d}")
    first = model.embed([p["a"] for p in pairs])
    second = model.embed([p["b"] for p in pairs])
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
    residual_rule(model, pairs, similarities)


if __name__ == "__main__":
    main()
