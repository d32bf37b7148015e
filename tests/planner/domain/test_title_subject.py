"""What a chat's proposed title is made from (``title_subject``): an unnamed chat's project, its
title calls so far and its first turn's exchange, read in one round trip."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from planner.domain.selectors import title_subject
from planner.domain.services.agent_questions import question_create
from planner.models import Message, Session, TitleSource, UsageRecord


def add(session: Session, seq: int, turn: int, kind: str, text: str) -> None:
    role = "assistant" if kind == "assistant" else "user"
    content = [{"type": "text", "text": text}]
    Message.objects.create(session=session, seq=seq, turn=turn, role=role, kind=kind, content=content)


def calls(session: Session, n: int) -> None:
    for _ in range(n):
        UsageRecord.objects.create(project=session.project, session=session, purpose="title", model="m")


@pytest.mark.django_db
def test_an_unnamed_chat_comes_with_its_project_and_its_first_turn_s_exchange(session):
    add(session, 1, 1, "human", "How do we ship?")
    add(session, 2, 1, "assistant", "In two steps.")
    add(session, 3, 1, "tool_results", "not quoted")
    add(session, 4, 1, "steer", "not quoted")
    add(session, 5, 2, "human", "And then?")
    calls(session, 1)
    UsageRecord.objects.create(project=session.project, session=session, purpose="turn", model="m")

    subject = title_subject(session_id=session.pk)

    assert subject is not None
    assert subject.project == session.project
    assert subject.project.settings == session.project.settings
    assert subject.title_calls == 1
    assert subject.first == [
        ("human", [{"type": "text", "text": "How do we ship?"}]),
        ("assistant", [{"type": "text", "text": "In two steps."}]),
    ]


@pytest.mark.django_db
def test_a_named_chat_a_question_s_sub_chat_and_a_deleted_one_get_none(session, chat_project, member):
    Session.objects.filter(pk=session.pk).update(title="Mine", title_source=TitleSource.HUMAN)
    assert title_subject(session_id=session.pk) is None
    question = question_create(user=member, project=chat_project, text="Is BAL-1 ready?")
    sub_chat = Session.objects.get(question=question)
    assert sub_chat.title_source == TitleSource.NONE
    assert title_subject(session_id=sub_chat.pk) is None
    gone = sub_chat.pk
    Session.objects.filter(pk=gone).delete()
    assert title_subject(session_id=gone) is None


@pytest.mark.django_db
def test_it_is_read_in_one_round_trip_on_postgresql(session):
    add(session, 1, 1, "human", "How do we ship?")
    piped: list[bool] = []

    def seen(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        piped.append(connection.vendor == "postgresql" and bool(connection.connection.pgconn.pipeline_status))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(seen):
        assert title_subject(session_id=session.pk) is not None
    # Both statements sent together, in one pipeline; SQLite runs each in the process.
    assert piped == ([True, True] if connection.vendor == "postgresql" else [False, False])
