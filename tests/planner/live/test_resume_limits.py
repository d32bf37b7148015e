"""Resuming a paused turn counts against the running-turn limits like starting one: an answer past
the limits is kept and the turn resumes, oldest first, once a turn frees up; a reply is refused."""

from __future__ import annotations

import json
import uuid

import pytest

from planner.domain.services.sessions import session_create
from planner.live.runner import runner
from planner.models import HumanRequest, Question, Session
from tests.fakes.scripted import Hang, call, say, tool_results
from tests.planner.api_client import client_for
from tests.planner.conftest import sync
from tracker.errors import RateLimitedError

pytestmark = pytest.mark.django_db(transaction=True)


async def busy(scripted, user, project) -> tuple[Session, Hang]:
    """A turn of ``user`` that runs until released."""
    session = await sync(session_create)(user=user, project=project)
    hang = Hang("Thinking", then=say("Done."))
    scripted.add(hang)
    await runner.send(session_id=session.pk, user=user, text="Think hard.")
    await hang.started.wait()
    return session, hang


async def paused_question(scripted, asker) -> tuple[dict, str, str]:
    """The asker's question, its sub-chat paused on ask_human: (question, sub-chat, request)."""
    scripted.add(call("ask_human", {"question": "Postgres or SQLite?"}))
    asked = (
        await (await client_for(asker)).post("/api/v1/projects/BAL/questions/", {"text": "Which DB?"})
    ).json()
    await runner.wait(uuid.UUID(asked["session"]))
    (pending,) = await sync(lambda: list(HumanRequest.objects.values_list("pk", flat=True)))()
    return asked, asked["session"], str(pending)


async def running_turns() -> int:
    return await sync(Session.objects.filter(state="running").count)()


async def test_an_answer_past_the_limits_is_kept_and_resumes_when_a_turn_frees_up(
    scripted, limits, chat_project, member, maintainer
):
    asked, sub, request = await paused_question(scripted, member)
    limits(running_turns_per_user=1)
    other, hang = await busy(scripted, member, chat_project)

    answered = await (await client_for(maintainer)).post(
        f"/api/v1/planner/sessions/{sub}/answers/", {"request": request, "text": "Postgres"}
    )

    body = answered.json()
    assert answered.status_code == 200, body
    assert (body["outcome"], body["resumed"]) == ("answered", False)
    assert "resumes as soon as a turn frees up" in body["waiting"]
    assert await running_turns() == 1  # the limit held
    kept = await sync(HumanRequest.objects.get)(pk=request)
    assert (kept.status, kept.answer) == ("answered", "Postgres")
    assert (await sync(Session.objects.get)(pk=sub)).state == "paused"

    scripted.add(call("answer_question", {"answer": "Postgres, say the humans."}), say("Answered."))
    hang.release.set()
    await runner.wait(other.pk)  # its end resumes the waiting turn
    await runner.wait(uuid.UUID(sub))

    question = await sync(Question.objects.get)(pk=asked["id"])
    assert (question.status, question.answer) == ("answered", "Postgres, say the humans.")
    resumed = scripted.turn_requests[-2]
    (result,) = tool_results(resumed)
    assert json.loads(result.content) == {"answer": "Postgres", "answered_by": "maintainer"}


async def test_the_project_limit_holds_an_answered_turn_too(
    scripted, limits, chat_project, member, maintainer
):
    _, sub, request = await paused_question(scripted, member)
    limits(running_turns_per_project=1)
    other, hang = await busy(scripted, maintainer, chat_project)

    body = (
        await (await client_for(maintainer)).post(
            f"/api/v1/planner/sessions/{sub}/answers/", {"request": request, "text": "Postgres"}
        )
    ).json()

    assert body["resumed"] is False
    assert "turns are already running in BAL" in body["waiting"]
    assert await running_turns() == 1
    scripted.add(say("I'll leave it to you."))
    hang.release.set()
    await runner.wait(other.pk)
    await runner.wait(uuid.UUID(sub))
    assert (await sync(Session.objects.get)(pk=sub)).state == "idle"


async def test_a_reply_past_the_limits_is_refused_and_writes_nothing(scripted, limits, chat_project, member):
    session = await sync(session_create)(user=member, project=chat_project)
    scripted.add(call("ask_human", {"question": "Friday or Monday?"}))
    await runner.send(session_id=session.pk, user=member, text="Plan the release.")
    await runner.wait(session.pk)
    limits(running_turns_per_user=1)
    other, hang = await busy(scripted, member, chat_project)

    with pytest.raises(RateLimitedError):
        await runner.send(session_id=session.pk, user=member, text="Monday")

    pending = await sync(
        lambda: list(HumanRequest.objects.filter(session=session).values_list("status", flat=True))
    )()
    assert pending == ["pending"]
    hang.release.set()
    await runner.wait(other.pk)


async def test_stop_ends_a_turn_whose_answers_wait(scripted, limits, chat_project, member, maintainer):
    asked, sub, request = await paused_question(scripted, member)
    limits(running_turns_per_user=1)
    other, hang = await busy(scripted, member, chat_project)
    await (await client_for(maintainer)).post(
        f"/api/v1/planner/sessions/{sub}/answers/", {"request": request, "text": "Postgres"}
    )

    assert await runner.stop(session_id=uuid.UUID(sub), user=member) is True

    session = await sync(Session.objects.get)(pk=sub)
    assert (session.state, session.resume_waiting) == ("idle", False)
    question = await sync(Question.objects.get)(pk=asked["id"])
    assert question.status == "needs_human"
    hang.release.set()
    await runner.wait(other.pk)
