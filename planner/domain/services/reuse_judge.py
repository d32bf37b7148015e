"""The judge of answer reuse (docs/domain.md#agents-questions): the project's model says whether an
answered question asks what a new one asks, when their vectors alone cannot tell.

all-MiniLM-L6-v2 puts rewordings anywhere from 0.3 to 0.93 and the closest different question
at 0.89 (docs/benchmarks.md#answer-reuse), so above ``reuse_threshold`` (0.90) the vectors decide
alone, and below it, down to ``reuse_judge_floor`` (0.45), the few most alike answered questions
about the same item are shown to the project's ``title_model`` (a cheap model), which names the one
asking the same thing, or none. Only with Claude (the demo planner has no judge: the threshold
alone decides), within the project's daily token budget, metered with purpose ``reuse_judge``.

The call is the runtime's (``planner/live/reuse_judging.py``, which also checks the budget and
the key): :func:`judge_call` here, inside the ask's transaction, says whether one is wanted and
what to show; asking then records nothing until the verdict is in, and asks again with it
(:class:`JudgeFirst`, ``runner.ask``). The verdict is the
model's untrusted words: only a number among the candidates it was shown names a question, and
that question must still be a candidate when the ask is recorded (:func:`judged_match`). The
questions' texts are the agents' own words, quoted as such; the worst a text steering the judge
can do is hand its asker the answer to another question about the same item, which the asker may
read anyway.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from planner.domain.services.answer_reuse import Match, Vector, near_answers
from planner.models import Question
from tracker.models import Item, Project
from tracker.selectors import demo_planner_reason, project_work_config

# The fakes of the model recognise a judge's request by this opening (tests/fakes/).
JUDGE_SYSTEM = (
    "You compare questions. An agent asks a question about a software project; other questions about "
    "the same thing were answered before. Say which earlier question asks for exactly the same "
    "information, so that its answer fully answers the new one. A question that asks for more, for "
    "less, or for something else (another value, another case, another step) is not the same. Reply "
    "with the number of that question, or 0 if none is the same: one number, nothing else."
)
CANDIDATES = 3  # the most alike answered questions shown to the judge
QUOTED_CHARS = 600  # of each question
NUMBER = re.compile(r"\s*(\d{1,2})\b")


@dataclass(frozen=True)
class JudgeCall:
    """What the judge is shown: the project, the prompt, and the candidates in its order."""

    project_id: int
    prompt: str
    candidates: tuple[int, ...]  # question ids, numbered from 1 in the prompt


@dataclass(frozen=True)
class Verdict:
    """What the judge said: the answered question that asks the same, or None (none does, or no
    verdict could be had: the question is then asked as if nothing were remembered)."""

    reuse_of: int | None


class JudgeFirst(Exception):  # noqa: N818 - a request to the caller, not an error
    """Raised inside the ask's transaction (which then records nothing) when a judge should be asked
    first; ``question_ask`` turns it into an ``Asked`` carrying :attr:`call`."""

    def __init__(self, call: JudgeCall) -> None:
        super().__init__("the judge of answer reuse is asked first")
        self.call = call


def judge_call(*, project: Project, item: Item | None, text: str, vector: Vector) -> JudgeCall | None:
    """What the judge is to see of a question of ``text`` about ``item``, or None: the judge is off
    (the floor at or above the threshold), the demo planner answers the project, or no answered
    question is alike enough."""
    work = project_work_config(project)
    if work.reuse_judge_floor >= min(work.reuse_threshold, 1.0) or demo_planner_reason(project) is not None:
        return None
    near = near_answers(project=project, item=item, vector=vector, floor=work.reuse_judge_floor)[:CANDIDATES]
    if not near:
        return None
    prompt = judge_prompt(text, [match.question.text for match in near])
    return JudgeCall(project.pk, prompt, tuple(match.question.pk for match in near))


def judge_prompt(text: str, answered: list[str]) -> str:
    """What the judge reads: the new question, and the answered ones numbered from 1."""
    earlier = "\n".join(
        f'<question number="{n}">\n{_cut(q)}\n</question>' for n, q in enumerate(answered, start=1)
    )
    return (
        f"<new-question>\n{_cut(text)}\n</new-question>\n\n<answered-before>\n{earlier}\n</answered-before>\n\n"
        "The number of the earlier question that asks the same, or 0:"
    )


def _cut(text: str) -> str:
    return text if len(text) <= QUOTED_CHARS else text[:QUOTED_CHARS] + " […]"


def verdict_of(reply: str, call: JudgeCall) -> Verdict:
    """The judge's ``reply`` read as a verdict: a number among the candidates names one; anything
    else (0, a word, another number) names none."""
    number = NUMBER.match(reply)
    chosen = int(number.group(1)) if number else 0
    return Verdict(call.candidates[chosen - 1] if 1 <= chosen <= len(call.candidates) else None)


def judged_match(*, project: Project, item: Item | None, vector: Vector, verdict: Verdict) -> Match | None:
    """The answered question ``verdict`` names, if it is still a candidate for this question: still
    answered first-hand, about ``item``, at least the floor alike (it may have changed meanwhile)."""
    if verdict.reuse_of is None:
        return None
    floor = project_work_config(project).reuse_judge_floor
    named = near_answers(project=project, item=item, vector=vector, floor=floor, question_id=verdict.reuse_of)
    if not named:
        return None
    earlier = Question.objects.select_related("project", "item").get(pk=verdict.reuse_of)
    return Match(earlier, named[0].similarity)
