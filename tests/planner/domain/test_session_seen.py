"""What every chat frame checks, in one statement: the same answer as the sessions a user sees."""

from __future__ import annotations

import uuid

import pytest

from planner.domain.selectors import session_project_seen, sessions_visible, work_waiting
from planner.models import Question, Session

pytestmark = pytest.mark.django_db


def test_a_session_is_seen_exactly_by_whom_the_session_list_shows_it(
    project, other_project, users, superuser
):
    owner_chat = Session.objects.create(project=project, user=users["member"])
    question = Question.objects.create(project=project, asker=users["maintainer"], text="When?")
    sub_chat = Session.objects.create(project=project, user=users["maintainer"], question=question)
    elsewhere = Session.objects.create(project=other_project, user=superuser)
    gone = users["owner"]
    gone.is_active = False
    gone.save()
    for user in [*users.values(), superuser]:
        for session in (owner_chat, sub_chat, elsewhere):
            visible = sessions_visible(user=user).filter(pk=session.pk).exists()
            seen = session_project_seen(user=user, session_id=str(session.pk))
            assert seen == (session.project_id if visible else None), (user.username, session.title)


def test_an_unknown_or_malformed_session_id_is_seen_by_nobody(users):
    assert session_project_seen(user=users["owner"], session_id=uuid.uuid4()) is None
    assert session_project_seen(user=users["owner"], session_id="not-a-uuid") is None


def test_work_waits_when_a_question_has_not_started_or_a_paused_turn_was_answered(project, member):
    assert work_waiting() is False
    question = Question.objects.create(project=project, asker=member, text="When?")
    assert work_waiting() is True
    Question.objects.filter(pk=question.pk).update(started=True)
    assert work_waiting() is False
    Session.objects.create(project=project, user=member, state="paused", resume_waiting=True)
    assert work_waiting() is True
