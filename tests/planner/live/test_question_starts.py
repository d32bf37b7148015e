"""Questions that wait for a free turn, and start later (docs/domain.md#agents-questions): from the
end of a turn, the asker's wait or the worker's pass, whatever the question is about; one that
cannot start holds back none behind it."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest
from django.conf import settings
from prometheus_client import REGISTRY

from planner.domain.services import question_turns
from planner.domain.services.agent_questions import MAX_START_FAILURES, question_create, questions_waiting
from planner.live.runner import runner
from planner.models import Message, Question, QuestionStatus, Session
from planner.tasks import start_waiting_work
from tests.fakes.scripted import Hang, call, say
from tests.planner.api_client import client_for
from tests.planner.conftest import sync
from tests.planner.web.test_questions import QUESTIONS, ask, waiters

pytestmark = pytest.mark.django_db(transaction=True)


def start_failures() -> float:
    return REGISTRY.get_sample_value("ballet_planner_start_failures_total", {"kind": "question"}) or 0.0


async def test_a_question_about_a_ticket_behind_a_full_project_starts_and_its_wait_answers(
    scripted, limits, chat_project, member, session, make_item
):
    """The question waits, unstarted, while the project's one running turn is taken; the asker
    waits; the turn ends, the question's sub-chat starts and answers during the wait."""
    limits(running_turns_per_project=1)
    ticket = await sync(make_item)(title="Export the plan")
    hang = Hang("Thinking", then=say("Done."))
    scripted.add(hang)
    await runner.send(session_id=session.pk, user=member, text="Think hard.")
    await hang.started.wait()
    client = await client_for(member)
    asked = await ask(client, "Which format does the export write?", item=ticket.key)
    held = await sync(Question.objects.get)(pk=asked["id"])
    scripted.add(call("answer_question", {"answer": "CSV."}), say("Done."))

    waiting = asyncio.ensure_future(client.get(f"{QUESTIONS}{asked['id']}/?wait=20"))
    await waiters(asked["id"])
    hang.release.set()
    response = await waiting
    await runner.wait(uuid.UUID(asked["session"]))  # the sub-chat's turn goes on past its answer
    await runner.settle()

    assert (held.status, held.started) == ("open", False)
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["answer"], body["item"]) == ("answered", "CSV.", ticket.key)


async def test_the_asker_s_wait_starts_a_question_about_a_ticket_once_a_turn_is_free(
    scripted, chat_project, member, make_item
):
    """A question left waiting by a process (its turn never started there) is started by its
    asker's wait, which then hears the answer."""
    ticket = await sync(make_item)(title="Export the plan")
    question = await sync(question_create)(
        user=member, project=chat_project, text="Which format?", item_key=ticket.key
    )
    scripted.add(call("answer_question", {"answer": "CSV."}), say("Done."))
    client = await client_for(member)

    response = await client.get(f"{QUESTIONS}{question.pk}/?wait=20")
    await runner.wait(uuid.UUID(response.json()["session"]))  # its turn goes on past its answer
    await runner.settle()

    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["answer"]) == ("answered", "CSV.")


@pytest.mark.skipif(
    settings.PRODUCTION_MODE,
    reason="the task runs the hub on an event loop of its own, which in the test process would take "
    "the process's Redis relay from the tests after it; tests/e2e/test_question_processes.py runs a "
    "question about a ticket past a full project with a real worker",
)
def test_the_workers_pass_starts_a_waiting_question_about_a_ticket(scripted, chat_project, member, make_item):
    ticket = make_item(title="Export the plan")
    question = question_create(user=member, project=chat_project, text="Which format?", item_key=ticket.key)
    scripted.add(call("answer_question", {"answer": "CSV."}), say("Done."))

    started = start_waiting_work()

    question.refresh_from_db()
    assert started == 1
    assert (question.status, question.answer, question.started) == ("answered", "CSV.", True)


async def test_a_question_that_cannot_start_holds_back_none_behind_it(
    scripted, chat_project, member, monkeypatch, caplog
):
    """The first question's start fails unexpectedly at every pass: each pass logs it with its id,
    counts it and goes on to the next question; after a few, the humans settle the first."""
    broken = await sync(question_create)(user=member, project=chat_project, text="Which database?")
    fine = await sync(question_create)(user=member, project=chat_project, text="Which queue broker?")
    begin = question_turns.question_turn_begin

    def failing(*, question_id: int):
        if question_id == broken.pk:
            raise RuntimeError("a bug in this question's start")
        return begin(question_id=question_id)

    monkeypatch.setattr(question_turns, "question_turn_begin", failing)
    scripted.add(call("answer_question", {"answer": "RabbitMQ."}), say("Done."))
    counted = start_failures()

    with caplog.at_level(logging.ERROR, logger="planner.live.runner"):
        first_pass = await runner.start_waiting(force=True)
        fine_session = await sync(lambda: Session.objects.get(question=fine).pk)()
        await runner.wait(fine_session)  # its end passes over what waits again
        for _ in range(MAX_START_FAILURES):
            if (await sync(Question.objects.get)(pk=broken.pk)).status != QuestionStatus.OPEN:
                break
            assert await runner.start_waiting(force=True) == []
    left = await sync(Question.objects.get)(pk=broken.pk)
    answered = await sync(Question.objects.get)(pk=fine.pk)

    assert first_pass == [fine_session]
    assert (answered.status, answered.answer) == ("answered", "RabbitMQ.")
    logged = f"question {broken.pk} failed to start: RuntimeError: a bug in this question's start"
    assert caplog.text.count(logged) == MAX_START_FAILURES
    assert (left.status, left.start_failures, left.started) == (
        QuestionStatus.NEEDS_HUMAN,
        MAX_START_FAILURES,
        True,
    )
    assert "a bug in this question's start" in left.reason
    assert start_failures() - counted == MAX_START_FAILURES


async def test_a_pass_that_cannot_read_what_waits_fails_no_wait(scripted, chat_project, member, monkeypatch):
    """The database down under a pass: the pass is logged and tried later; the asker's wait still
    answers (with the question as it stands)."""
    question = await sync(question_create)(user=member, project=chat_project, text="Which database?")

    def down() -> list:
        raise RuntimeError("the database is down")

    monkeypatch.setattr("planner.domain.services.agent_questions.questions_waiting", down)
    client = await client_for(member)
    response = await client.get(f"{QUESTIONS}{question.pk}/?wait=0.5")

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "open"
    assert runner.hub.work_waiting


async def test_a_question_started_by_another_pass_is_not_started_again(scripted, chat_project, member):
    """Two passes list one waiting question (two processes): its first turn starts once; the
    later start finds it started and sends nothing (it would steer the running turn)."""
    question = await sync(question_create)(user=member, project=chat_project, text="Which database?")
    listed = await sync(questions_waiting)()
    hang = Hang("Thinking", then=say("Done."))
    scripted.add(hang)
    first = await runner.start_waiting(force=True)
    await hang.started.wait()
    again = await runner._start_question(listed[0])  # the other process's pass, listed before
    hang.release.set()
    await runner.wait(first[0])
    sent = await sync(lambda: Message.objects.filter(session__question=question, kind="human").count())()

    assert [w.id for w in listed] == [question.pk]
    assert again is False
    assert sent == 1
