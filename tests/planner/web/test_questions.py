"""Agents' questions (docs/domain.md): asked over REST, answered by the planner or escalated to a human."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from knowledge.services import knowledge_create
from planner.ground import bridge
from planner.live import question_waits
from planner.live.hub import hub
from planner.live.runner import runner
from planner.models import HumanRequest, Question, Session
from tests.fakes.scripted import Hang, call, change_notes, say, tool_results
from tests.planner.api_client import client_for
from tests.planner.conftest import sync
from tracker.models import ActivityEvent
from tracker.services.activity import Actor

pytestmark = pytest.mark.django_db(transaction=True)

QUESTIONS = "/api/v1/projects/BAL/questions/"


@pytest.fixture
def agent(member):
    """The worker that asks: a token user, member of the project."""
    return member


async def ask(client, text="Which database do we use?", **extra):
    response = await client.post(QUESTIONS, {"text": text, **extra})
    assert response.status_code == 201, response.content
    return response.json()


async def waiters(question_id: int, count: int = 1) -> None:
    """Return once ``count`` requests wait for the question's answer (the answer then comes during
    their wait); fail if they never do."""
    for _ in range(500):
        if len(hub.listeners.get(question_waits.question_topic(question_id), ())) >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{count} waits for question {question_id} never began")


async def test_the_planner_answers_from_knowledge_and_wait_returns_the_answer(
    scripted, chat_project, agent, owner, make_item
):
    item = await sync(make_item)(title="Store sessions", state="ready")
    entry = await sync(knowledge_create)(
        actor=Actor(user=owner),
        kind="decision",
        title="Database",
        body="We use PostgreSQL 17.",
        projects=[chat_project],
    )
    scripted.add(
        call("get_knowledge", {"id": entry.pk}),
        call("answer_question", {"answer": "PostgreSQL 17, per the Database decision."}),
        say("Answered."),
    )
    client = await client_for(agent)
    asked = await ask(client, item=item.key)
    assert (asked["status"], asked["item"], asked["asker"]) == ("open", item.key, "member")
    await runner.wait(uuid.UUID(asked["session"]))  # the test database cannot be read while written
    waited = await client.get(f"{QUESTIONS}{asked['id']}/?wait=10")
    assert waited.status_code == 200, waited.content
    body = waited.json()
    assert body["status"] == "answered"
    assert body["answer"] == "PostgreSQL 17, per the Database decision."
    assert body["answered_by"] == f"planner:{asked['session']}"
    first = scripted.turn_requests[0].messages[0]
    assert item.key in first.content[0].text  # the item's key is in the first message
    assert "answer_question" in [t.name for t in scripted.turn_requests[0].tools]
    verbs = await sync(
        lambda: list(
            ActivityEvent.objects.filter(target=f"question:{asked['id']}").values_list("verb", flat=True)
        )
    )()
    assert verbs == ["question.asked", "question.answered"]


async def test_an_escalated_question_is_answered_by_another_member(scripted, chat_project, agent, maintainer):
    scripted.add(call("ask_human", {"question": "Postgres or SQLite for the cache?"}))
    asker = await client_for(agent)
    asked = await ask(asker)
    await runner.wait(uuid.UUID(asked["session"]))
    still = await asker.get(f"{QUESTIONS}{asked['id']}/?wait=0.2")
    assert still.json()["status"] == "open"
    colleague = await client_for(maintainer)
    listed = (await colleague.get("/api/v1/planner/sessions/?project=BAL")).json()["results"]
    (sub,) = [s for s in listed if s["question"] == asked["id"]]
    assert sub["waiting"] is True
    assert sub["user"] == "member"
    transcript = (await colleague.get(f"/api/v1/planner/sessions/{sub['id']}")).json()
    assert transcript["can_send"] is False
    assert transcript["about"]["text"] == "Which database do we use?"
    (pending,) = transcript["requests"]
    refused = await colleague.post(f"/api/v1/planner/sessions/{sub['id']}/messages/", {"text": "Postgres"})
    assert refused.status_code == 403
    assert "answer its questions in place" in refused.json()["error"]["message"]
    scripted.add(call("answer_question", {"answer": "Postgres, says maintainer."}), say("Done."))
    waiting = asyncio.ensure_future(asker.get(f"{QUESTIONS}{asked['id']}/?wait=10"))
    await waiters(asked["id"])
    answered = await colleague.post(
        f"/api/v1/planner/sessions/{sub['id']}/answers/", {"request": pending["id"], "text": "Postgres"}
    )
    assert answered.status_code == 200, answered.content
    body = (await waiting).json()
    assert (body["status"], body["answer"]) == ("answered", "Postgres, says maintainer.")
    await runner.wait(uuid.UUID(sub["id"]))
    (result,) = tool_results(scripted.turn_requests[1])  # the model's call after the answer
    assert json.loads(result.content) == {"answer": "Postgres", "answered_by": "maintainer"}
    request = await sync(HumanRequest.objects.select_related("answered_by").get)(pk=pending["id"])
    assert request.answered_by.username == "maintainer"


async def test_a_wait_returns_the_planners_answer_given_during_it(scripted, chat_project, agent):
    hang = Hang("Looking it up", then=call("answer_question", {"answer": "PostgreSQL 17."}))
    scripted.add(hang, say("Answered."))
    client = await client_for(agent)
    asked = await ask(client)
    await hang.started.wait()

    waiting = asyncio.ensure_future(client.get(f"{QUESTIONS}{asked['id']}/?wait=20"))
    await waiters(asked["id"])
    hang.release.set()
    waited = await waiting
    await runner.wait(uuid.UUID(asked["session"]))

    assert asked["status"] == "open"
    assert waited.status_code == 200, waited.content
    assert (waited.json()["status"], waited.json()["answer"]) == ("answered", "PostgreSQL 17.")


async def test_more_agents_wait_than_there_are_database_threads_and_all_hear_the_answer(
    scripted, chat_project, agent, maintainer
):
    """A wait holds none of the runner's database threads (one on SQLite): the answer, and every
    other wait's reads, get through while all of them wait."""
    scripted.add(call("ask_human", {"question": "Postgres or SQLite for the cache?"}))
    asked = await ask(await client_for(agent))
    sub = uuid.UUID(asked["session"])
    await runner.wait(sub)
    agents = [await client_for(agent) for _ in range(bridge.THREADS + 1)]
    waiting = [asyncio.ensure_future(a.get(f"{QUESTIONS}{asked['id']}/?wait=30")) for a in agents]
    await waiters(asked["id"], len(waiting))

    pending = await sync(lambda: HumanRequest.objects.get(session_id=sub).pk)()
    scripted.add(call("answer_question", {"answer": "Postgres, says maintainer."}), say("Done."))
    answered = await (await client_for(maintainer)).post(
        f"/api/v1/planner/sessions/{sub}/answers/", {"request": pending, "text": "Postgres"}
    )
    waited = [await w for w in waiting]
    await runner.wait(sub)

    assert answered.status_code == 200, answered.content
    assert [(w.status_code, w.json()["status"], w.json()["answer"]) for w in waited] == [
        (200, "answered", "Postgres, says maintainer.")
    ] * len(agents)


async def test_who_may_ask_and_read(scripted, chat_project, agent, viewer, users, other_project):
    viewer_client = await client_for(viewer)
    refused = await viewer_client.post(QUESTIONS, {"text": "May I?"})
    assert refused.status_code == 403
    stranger = await client_for(users["stranger"])
    assert (await stranger.post(QUESTIONS, {"text": "May I?"})).status_code == 404
    assert (await stranger.get(QUESTIONS)).status_code == 404
    assert (await stranger.post("/api/v1/projects/NOPE/questions/", {"text": "?"})).status_code == 404
    scripted.add(call("answer_question", {"answer": "Yes."}), say("Done."))
    asked = await ask(await client_for(agent))
    await runner.wait(uuid.UUID(asked["session"]))
    assert (await stranger.get(f"{QUESTIONS}{asked['id']}/")).status_code == 404
    read = await viewer_client.get(f"{QUESTIONS}{asked['id']}/?wait=5")
    assert read.status_code == 200
    sub = await viewer_client.get(f"/api/v1/planner/sessions/{asked['session']}")
    assert sub.status_code == 404  # sub-chats are for those who may chat


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": ""}, "text"),
        ({"text": 5}, "text"),
        ({"text": "x" * 8001}, "text"),
        ({"text": "Why?", "item": "BAL-999"}, "item"),
        ({"text": "Why?", "item": "BAL-²"}, "item"),
        ({"text": "Why?", "colour": "red"}, "colour"),
    ],
)
async def test_bad_questions_are_refused_with_field_errors(chat_project, agent, body, field):
    response = await (await client_for(agent)).post(QUESTIONS, body)
    assert response.status_code == 400, response.content
    assert field in json.dumps(response.json())
    assert await sync(Question.objects.count)() == 0


@pytest.mark.parametrize("query", ["?wait=abc", "?wait=61", "?wait=-1"])
async def test_a_bad_wait_is_a_400(scripted, chat_project, agent, query):
    scripted.add(call("answer_question", {"answer": "Yes."}), say("Done."))
    client = await client_for(agent)
    asked = await ask(client)
    await runner.wait(uuid.UUID(asked["session"]))
    assert (await client.get(f"{QUESTIONS}{asked['id']}/{query}")).status_code == 400
    assert (await client.get(f"{QUESTIONS}nope/")).status_code == 404


async def test_withdrawing_stops_the_sub_chat(scripted, chat_project, agent, maintainer):
    scripted.add(call("ask_human", {"question": "Which?"}))
    client = await client_for(agent)
    asked = await ask(client)
    await runner.wait(uuid.UUID(asked["session"]))
    other = await client_for(maintainer)
    assert (await other.post(f"{QUESTIONS}{asked['id']}/withdraw/")).status_code == 403
    withdrawn = await client.post(f"{QUESTIONS}{asked['id']}/withdraw/")
    assert withdrawn.status_code == 200, withdrawn.content
    assert withdrawn.json()["status"] == "withdrawn"
    session = await sync(Session.objects.get)(pk=asked["session"])
    assert session.state == "idle"
    assert await sync(lambda: list(HumanRequest.objects.values_list("status", flat=True)))() == ["cancelled"]
    assert (await client.post(f"{QUESTIONS}{asked['id']}/withdraw/")).status_code == 409


async def test_a_question_past_the_running_turn_limits_waits_then_starts(
    scripted, limits, chat_project, agent, session
):
    limits(running_turns_per_user=1)
    hang = Hang("Thinking", then=say("Done."))
    scripted.add(hang)
    await runner.send(session_id=session.pk, user=agent, text="Think hard.")
    await hang.started.wait()
    client = await client_for(agent)
    asked = await ask(client)
    question = await sync(Question.objects.get)(pk=asked["id"])
    assert (question.status, question.started) == ("open", False)
    scripted.add(call("answer_question", {"answer": "Later, but answered."}), say("Done."))
    hang.release.set()
    await runner.wait(session.pk)  # its end starts the question's turn
    await runner.wait(uuid.UUID(asked["session"]))
    body = (await client.get(f"{QUESTIONS}{asked['id']}/?wait=10")).json()
    assert (body["status"], body["answer"]) == ("answered", "Later, but answered.")


async def test_question_requests_are_limited_per_token(scripted, limits, chat_project, agent):
    limits(mcp_requests_per_minute=2)
    client = await client_for(agent)
    assert (await client.get(QUESTIONS)).status_code == 200
    assert (await client.get(QUESTIONS)).status_code == 200
    refused = await client.get(QUESTIONS)
    assert refused.status_code == 429
    assert "a minute" in refused.json()["error"]["message"]


async def test_other_sessions_hear_of_questions_in_their_change_notes(scripted, chat_project, agent, session):
    scripted.add(call("answer_question", {"answer": "Use Postgres."}), say("Done."))
    asked = await ask(await client_for(agent), "Which database?")
    await runner.wait(uuid.UUID(asked["session"]))
    scripted.add(say("Noted."))
    await runner.send(session_id=session.pk, user=agent, text="Anything new?")
    await runner.wait(session.pk)
    notes = change_notes(scripted.turn_requests[-1])
    assert notes
    assert f'"question:{asked["id"]}" asked by' in notes[-1]
    assert "answered by" in notes[-1]
    assert "Use Postgres." in notes[-1]
