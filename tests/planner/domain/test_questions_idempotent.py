"""Asking is idempotent with a key: a client that retries a question whose answer it lost gets the
same question back (REST and MCP, also when the two requests race), and lists its own questions."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from planner.live.runner import runner
from planner.models import Question, Session
from tests.fakes.scripted import call, say
from tests.planner.api_client import client_for
from tests.planner.conftest import sync
from tests.planner.mcp.conftest import connected, token_of

pytestmark = pytest.mark.django_db(transaction=True)

QUESTIONS = "/api/v1/projects/BAL/questions/"


async def counts() -> tuple[int, int]:
    return await sync(Question.objects.count)(), await sync(Session.objects.count)()


async def test_a_retry_with_the_same_key_returns_the_same_question(scripted, chat_project, member):
    scripted.add(call("answer_question", {"answer": "PostgreSQL."}), say("Answered."))
    client = await client_for(member)
    question = {"text": "Which database?", "idempotency_key": "agent-7:which-db"}

    first = await client.post(QUESTIONS, question)
    await runner.wait(uuid.UUID(first.json()["session"]))
    again = await client.post(QUESTIONS, question)

    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["status"] == "answered"  # as it is now: the retry reads the answer
    assert await counts() == (1, 1)
    assert len(scripted.turn_requests) == 2  # one sub-chat's turn, not two


async def test_the_key_travels_in_a_header_too(scripted, chat_project, member):
    scripted.add(call("ask_human", {"question": "Which?"}))
    client = await client_for(member)
    client.headers["Idempotency-Key"] = "retry-42"

    first = await client.post(QUESTIONS, {"text": "Which queue?"})
    await runner.wait(uuid.UUID(first.json()["session"]))
    again = await client.post(QUESTIONS, {"text": "Which queue?"})

    assert again.json()["id"] == first.json()["id"]
    assert await counts() == (1, 1)


async def test_the_same_key_for_another_question_is_a_conflict(scripted, chat_project, member):
    scripted.add(call("ask_human", {"question": "Which?"}))
    client = await client_for(member)
    first = await client.post(QUESTIONS, {"text": "Which queue?", "idempotency_key": "k1"})
    await runner.wait(uuid.UUID(first.json()["session"]))

    other = await client.post(QUESTIONS, {"text": "Which cache?", "idempotency_key": "k1"})

    assert other.status_code == 409
    assert f"question {first.json()['id']}" in other.json()["error"]["message"]
    assert await counts() == (1, 1)


@pytest.mark.parametrize("key", ["é", "x" * 201, "tab\there"])
async def test_a_bad_key_is_a_400(chat_project, member, key):
    response = await (await client_for(member)).post(QUESTIONS, {"text": "Why?", "idempotency_key": key})
    assert response.status_code == 400
    assert "idempotency_key" in json.dumps(response.json())
    assert await counts() == (0, 0)


async def test_two_retries_racing_make_one_question(scripted, chat_project, member):
    scripted.add(call("ask_human", {"question": "Which?"}))
    client = await client_for(member)
    question = {"text": "Which queue?", "idempotency_key": "race"}

    responses = await asyncio.gather(client.post(QUESTIONS, question), client.post(QUESTIONS, question))

    assert sorted(r.status_code for r in responses) == [200, 201]
    assert len({r.json()["id"] for r in responses}) == 1
    await runner.wait(uuid.UUID(responses[0].json()["session"]))
    assert await counts() == (1, 1)


async def test_questions_are_listed_by_asker(scripted, chat_project, member, maintainer):
    scripted.add(call("ask_human", {"question": "A?"}), call("ask_human", {"question": "B?"}))
    mine = await client_for(member)
    theirs = await client_for(maintainer)
    asked = (await mine.post(QUESTIONS, {"text": "Mine?"})).json()
    await runner.wait(uuid.UUID(asked["session"]))
    other = (await theirs.post(QUESTIONS, {"text": "Theirs?"})).json()
    await runner.wait(uuid.UUID(other["session"]))

    listed = (await mine.get(f"{QUESTIONS}?asker=member")).json()["results"]

    assert [q["id"] for q in listed] == [asked["id"]]


async def test_ask_question_over_mcp_is_idempotent(scripted, chat_project, member):
    scripted.add(call("ask_human", {"question": "Which?"}))
    token = await sync(token_of)(member)
    ask = {"project": "BAL", "text": "Which queue?", "idempotency_key": "mcp-1", "wait_seconds": 0}

    async with connected(token) as session:
        first = (await session.call_tool("ask_question", ask)).structured_content
        assert first is not None
        await runner.wait(uuid.UUID(first["session"]))
        again = (await session.call_tool("ask_question", ask)).structured_content
        assert again is not None

    assert again["id"] == first["id"]
    assert await counts() == (1, 1)
