"""A question's sub-chat and its turns (docs/domain.md#agents-questions): its first turn, started as
the asker, and stopping it once no question waits on it.

Apart from ``agent_questions.py``, which the session services import: these call them. Each runs
on the database threads and returns plain data (docs/architecture.md#one-bridge).
"""

from __future__ import annotations

import uuid

from planner.domain.selectors import SessionView
from planner.domain.services import sessions
from planner.domain.services.agent_questions import first_message
from planner.domain.services.sessions import Begin
from planner.models import Question, Session


def question_turn_begin(*, question_id: int) -> Begin:
    """Send the question's first message to its sub-chat, as its asker: the sub-chat's first turn
    (``session_begin`` with ``question``: refused with QuestionNotWaitingError if the question was
    settled or its turn started meanwhile)."""
    question = Question.objects.select_related("asker", "item__project", "session").get(pk=question_id)
    text = sessions.check_text(first_message(question))
    return sessions.session_begin(
        session_id=question.session.pk, user=question.asker, text=text, question=True
    )


def withdrawn_session(*, session_id: uuid.UUID) -> SessionView:
    """The sub-chat of a question just withdrawn, for the runner that stops it (the withdrawal
    checked who may)."""
    return SessionView.of(Session.objects.get(pk=session_id))
