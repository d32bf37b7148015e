"""A question never hangs: a sub-chat that ends without an answer leaves it to the project's humans
(``needs_human``, with the reason), the asker's wait returns that at once, and a member answers it."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from planner.agent.calls import GatewayError
from planner.domain.services.sessions import session_create, sessions_recover_dead
from planner.live.runner import runner
from planner.models import Question, Session
from tests.fakes.scripted import Hang, call, change_notes, say
from tests.planner.api_client import client_for
from tests.planner.conftest import sync
from tests.planner.live.test_recovery import crash_mid_round
from tracker.models import ActivityEvent
from tracker.services.activity import Actor
from tracker.services.projects import project_update

pytestmark = pytest.mark.django_db(transaction=True)

QUESTIONS = "/api/v1/projects/BAL/questions/"


async def ask(client, text="Which database do we use?"):
    response = await client.post(QUESTIONS, {"text": text})
    assert response.status_code == 201, response.content
    return response.json()


async def wait_during(client, asked, hang: Hang, *then):
    """The asker waits; only then does the model's hanging call end, with ``then`` scripted after."""
    waiting = asyncio.ensure_future(client.get(f"{QUESTIONS}{asked['id']}/?wait=20"))
    await hang.started.wait()
    await asyncio.sleep(0.2)  # the wait has begun
    hang.release.set()
    response = await waiting
    await runner.wait(uuid.UUID(asked["session"]))
    assert response.status_code == 200, response.content
    return response.json()


async def test_a_turn_that_ends_without_answering_leaves_it_to_the_humans(scripted, chat_project, member):
    hang = Hang("Let me think", then=say("I could not find it."))
    scripted.add(hang)
    client = await client_for(member)
    asked = await ask(client)

    body = await wait_during(client, asked, hang)

    assert (body["status"], body["reason"]) == (
        "needs_human",
        "The planner ended its turn without answering.",
    )
    verbs = await sync(
        lambda: list(
            ActivityEvent.objects.filter(target=f"question:{asked['id']}").values_list("verb", flat=True)
        )
    )()
    assert verbs == ["question.asked", "question.needs_human"]


async def test_a_failed_turn_leaves_it_to_the_humans_with_the_error(scripted, chat_project, member):
    scripted.add(GatewayError("overloaded", "The model is overloaded."))
    client = await client_for(member)
    asked = await ask(client)
    await runner.wait(uuid.UUID(asked["session"]))

    body = (await client.get(f"{QUESTIONS}{asked['id']}/?wait=20")).json()

    assert body["status"] == "needs_human"
    assert body["reason"].startswith("The planner's turn failed before it answered: ")
    assert "overloaded" in body["reason"]


async def test_running_out_of_rounds_leaves_it_to_the_humans(scripted, chat_project, member, owner):
    await sync(project_update)(actor=Actor(user=owner), project=chat_project, settings={"max_rounds": 1})
    scripted.add(call("list_items"))
    client = await client_for(member)
    asked = await ask(client)
    await runner.wait(uuid.UUID(asked["session"]))

    body = (await client.get(f"{QUESTIONS}{asked['id']}/")).json()

    assert (body["status"], body["reason"]) == (
        "needs_human",
        "The planner ran out of rounds before it answered.",
    )


async def test_a_stopped_turn_leaves_it_to_the_humans(scripted, chat_project, member):
    hang = Hang("Searching")
    scripted.add(hang)
    client = await client_for(member)
    asked = await ask(client)
    waiting = asyncio.ensure_future(client.get(f"{QUESTIONS}{asked['id']}/?wait=20"))
    await hang.started.wait()
    await asyncio.sleep(0.2)  # the wait has begun (SQLite takes one writer at a time)

    await runner.stop(session_id=uuid.UUID(asked["session"]), user=member)
    body = (await waiting).json()

    assert (body["status"], body["reason"]) == (
        "needs_human",
        "The planner's turn was stopped before it answered.",
    )


async def test_a_sub_chat_whose_process_died_leaves_it_to_the_humans(chat_project, member):
    client = await client_for(member)
    question = await sync(_asked_then_crashed)(chat_project, member)
    waiting = asyncio.ensure_future(client.get(f"{QUESTIONS}{question.pk}/?wait=20"))
    await asyncio.sleep(0.2)  # the wait has begun

    assert [r.session_id for r in await sync(sessions_recover_dead)()] == [question.session.pk]  # the sweep
    body = (await waiting).json()

    assert body["status"] == "needs_human"
    assert "the turn was recovered" in body["reason"]


def _asked_then_crashed(project, user) -> Question:
    from planner.domain.services.agent_questions import question_create  # noqa: PLC0415

    question = question_create(user=user, project=project, text="Which database?")
    question.started = True
    question.save(update_fields=["started"])
    crash_mid_round(question.session, user)
    return question


async def test_a_member_answers_a_question_left_to_the_humans(
    scripted, chat_project, member, maintainer, viewer, users
):
    scripted.add(say("No idea."))
    asker = await client_for(member)
    asked = await ask(asker)
    await runner.wait(uuid.UUID(asked["session"]))
    url = f"{QUESTIONS}{asked['id']}/answer/"

    refused_viewer = await (await client_for(viewer)).post(url, {"answer": "PostgreSQL"})
    refused_stranger = await (await client_for(users["stranger"])).post(url, {"answer": "PostgreSQL"})
    empty = await (await client_for(maintainer)).post(url, {"answer": " "})
    answered = await (await client_for(maintainer)).post(url, {"answer": "PostgreSQL 17."})
    again = await (await client_for(maintainer)).post(url, {"answer": "SQLite"})
    waited = (await asker.get(f"{QUESTIONS}{asked['id']}/?wait=5")).json()

    assert (refused_viewer.status_code, refused_stranger.status_code, empty.status_code) == (403, 404, 400)
    assert answered.status_code == 200, answered.content
    assert (waited["status"], waited["answer"], waited["answered_by"]) == (
        "answered",
        "PostgreSQL 17.",
        "user:maintainer",
    )
    assert again.status_code == 409


async def test_an_open_question_is_answered_in_its_sub_chat_not_here(
    scripted, chat_project, member, maintainer
):
    scripted.add(call("ask_human", {"question": "Postgres or SQLite?"}))
    asked = await ask(await client_for(member))
    await runner.wait(uuid.UUID(asked["session"]))

    refused = await (await client_for(maintainer)).post(
        f"{QUESTIONS}{asked['id']}/answer/", {"answer": "Yes"}
    )

    assert refused.status_code == 409
    assert "sub-chat" in refused.json()["error"]["message"]
    assert (await sync(Question.objects.get)(pk=asked["id"])).status == "open"


async def test_a_question_left_to_the_humans_can_be_withdrawn(scripted, chat_project, member):
    scripted.add(say("No idea."))
    client = await client_for(member)
    asked = await ask(client)
    await runner.wait(uuid.UUID(asked["session"]))

    withdrawn = await client.post(f"{QUESTIONS}{asked['id']}/withdraw/")

    assert withdrawn.json()["status"] == "withdrawn"


async def test_an_answered_question_stays_answered_when_the_turn_ends(scripted, chat_project, member):
    scripted.add(call("answer_question", {"answer": "PostgreSQL."}), say("Answered."))
    client = await client_for(member)
    asked = await ask(client)
    await runner.wait(uuid.UUID(asked["session"]))

    body = (await client.get(f"{QUESTIONS}{asked['id']}/")).json()

    assert (body["status"], body["reason"]) == ("answered", "")
    assert (await sync(Session.objects.get)(pk=asked["session"])).state == "idle"


async def test_metrics_count_questions_by_status_and_age(scripted, chat_project, member):
    scripted.add(say("No idea."))
    client = await client_for(member)
    left = await ask(client, "Which cache?")
    await runner.wait(uuid.UUID(left["session"]))
    await sync(Question.objects.filter(pk=left["id"]).update)(
        created_at=timezone.now() - timedelta(minutes=5)
    )

    text = (await client.client.get("/metrics")).content.decode()

    assert 'ballet_questions{status="needs_human"} 1.0' in text
    assert 'ballet_questions{status="answered"} 0.0' in text
    age = float(text.split('ballet_questions_oldest_age_seconds{status="needs_human"} ')[1].split()[0])
    assert 300 <= age < 400
    assert 'ballet_questions_oldest_age_seconds{status="open"} 0.0' in text


async def test_a_question_that_cannot_start_holds_back_no_other_askers(
    scripted, limits, chat_project, member, maintainer
):
    """The oldest waiting question's asker still runs a turn; a later asker's question starts."""
    limits(running_turns_per_user=1)
    busy = {}
    for user in (member, maintainer):
        busy[user.username] = await sync(session_create)(user=user, project=chat_project)
        hang = Hang("Thinking", then=say("Done."))
        scripted.add(hang)
        await runner.send(session_id=busy[user.username].pk, user=user, text="Think hard.")
        await hang.started.wait()
        busy[user.username + "-hang"] = hang
    first = await ask(await client_for(member), "Which cache?")  # waits: member's turn is taken
    second = await ask(await client_for(maintainer), "Which queue?")  # waits too, for now
    scripted.add(call("answer_question", {"answer": "Redis streams."}), say("Answered."))

    busy["maintainer-hang"].release.set()  # maintainer's turn ends: a turn is free for them
    await runner.wait(busy["maintainer"].pk)
    await runner.wait(uuid.UUID(second["session"]))

    started = await sync(lambda: dict(Question.objects.values_list("pk", "started")))()
    assert started == {first["id"]: False, second["id"]: True}
    answered = await sync(Question.objects.get)(pk=second["id"])
    assert (answered.status, answered.answer) == ("answered", "Redis streams.")
    scripted.add(call("answer_question", {"answer": "Memcached."}), say("Answered."))
    busy["member-hang"].release.set()
    await runner.wait(busy["member"].pk)  # now member's question starts
    await runner.wait(uuid.UUID(first["session"]))


async def test_other_sessions_hear_that_a_question_needs_a_human(scripted, chat_project, member, session):
    scripted.add(say("No idea."))
    asked = await ask(await client_for(member), "Which cache?")
    await runner.wait(uuid.UUID(asked["session"]))
    scripted.add(say("Noted."))

    await runner.send(session_id=session.pk, user=member, text="Anything new?")
    await runner.wait(session.pk)

    notes = change_notes(scripted.turn_requests[-1])
    assert (
        f'"question:{asked["id"]}" needs a human: "The planner ended its turn without answering."'
        in notes[-1]
    )
