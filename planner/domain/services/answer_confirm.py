"""A human confirms the planner's words of their reply (docs/domain.md#agents-questions).

When a question's sub-chat asks a human (``ask_human``) and then answers the question
(``answer_question``), the answer stands on that human's reply (``answered_by`` names them,
``answered_via`` the planner) but is in the planner's words, which whoever steers the sub-chat may
have chosen: the asker could have the planner answer "Yes" after an owner replied "No". So such an
answer is given to its asker and kept nowhere else until the human confirms its words, in one
click: then, and only then, it becomes a decision entry (their reply quoted as theirs, the planner's
words as the planner's) and is given to later questions that mean the same.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from planner.domain.services import answer_reuse
from planner.domain.services.agent_questions import first_of, group_locked, question_get
from planner.models import Question, QuestionStatus
from tracker.errors import InvalidStateError, PermissionDeniedError
from tracker.models import Project
from tracker.services.activity import Actor, activity_record
from tracker.trust.permissions import PLANNER_CHAT, require


def awaiting_confirmation(question: Question) -> bool:
    """The planner answered ``question`` in its words of a human's reply, not confirmed yet."""
    return (
        question.status == QuestionStatus.ANSWERED and bool(question.answered_via) and not question.confirmed
    )


@transaction.atomic
def question_confirm(*, user: User, project: Project, question_id: Any) -> Question:
    """``user`` confirms the planner's words of their reply as their answer to the question (and to
    those joined to it): kept as their decision, given to later questions. Confirming again
    changes nothing."""
    require(user, project, PLANNER_CHAT)
    found = question_get(user=user, project=project, question_id=question_id)
    first = first_of(found)
    group = group_locked(first)
    question = next(q for q in group if q.pk == found.pk)
    if question.confirmed:
        return question
    if not awaiting_confirmation(question):
        raise InvalidStateError(
            "Only an answer the planner worded from a human's reply waits for confirmation: not this one."
        )
    if question.human_id != user.pk:
        name = question.answered_by.removeprefix("user:")
        raise PermissionDeniedError(f"Only {name}, on whose reply the planner answered, confirms its words.")
    relayed = [q for q in group if awaiting_confirmation(q) and q.answered_via == question.answered_via]
    Question.objects.filter(pk__in=[q.pk for q in relayed]).update(confirmed=True)
    kept = next(q for q in relayed if q.pk == first) if any(q.pk == first for q in relayed) else question
    kept.confirmed = question.confirmed = True
    session_id = uuid.UUID(question.answered_via.removeprefix("planner:"))
    request = answer_reuse.human_of_session(session_id)
    answer_reuse.decision_record(question=kept, human=user, session_id=None, request=request)
    activity_record(
        actor=Actor(user=user),
        organization_id=project.organization_id,
        project=project,
        verb="question.confirmed",
        target=f"question:{kept.pk}",
        data={"answer": kept.answer[:200], "item": kept.item.key if kept.item else None},
    )
    if question.pk != kept.pk:
        question.decision_id = kept.decision_id
    return question
