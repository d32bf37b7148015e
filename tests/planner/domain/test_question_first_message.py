"""A question's sub-chat opens with the agent's question as the agent asked it (docs/protocol.md):
the model is also told how to answer, but watchers, the page and the REST transcript never show
that instruction as if someone had written it."""

from __future__ import annotations

import uuid

import pytest

from planner.live.runner import runner
from planner.models import Message
from tests.fakes.scripted import Hang, call, say
from tests.planner.api_client import client_for
from tests.planner.conftest import frames_until, open_socket, sync

pytestmark = pytest.mark.django_db(transaction=True)

QUESTIONS = "/api/v1/projects/BAL/questions/"
INSTRUCTION = "Answer with the answer_question tool"  # of the instruction, never of the question
TEXT = "Should the export read the replica?"


async def asked(client, **extra) -> dict:
    response = await client.post(QUESTIONS, {"text": TEXT, **extra})
    assert response.status_code == 201, response.content
    return response.json()


async def test_the_transcript_shows_the_question_as_asked_and_the_model_gets_the_instruction(
    scripted, chat_project, member, owner, make_item
):
    item = await sync(make_item)(title="Export bookings", state="ready")
    scripted.add(call("answer_question", {"answer": "Yes, the replica."}), say("Answered."))
    question = await asked(await client_for(member), item=item.key)
    await runner.wait(uuid.UUID(question["session"]))

    sent = scripted.turn_requests[0].messages[0].content[0].text
    assert INSTRUCTION in sent  # the model is told how to answer
    assert item.key in sent
    stored = await sync(lambda: Message.objects.get(session_id=question["session"], seq=1).content)()
    assert INSTRUCTION in stored[0]["text"]  # and what it was sent is kept

    for reader in (member, owner):  # the asker, and a member of the project who reads the sub-chat
        response = await (await client_for(reader)).get(f"/api/v1/planner/sessions/{question['session']}")
        assert response.status_code == 200, response.content
        first = response.json()["messages"][0]
        assert (first["kind"], first["author"], first["role"]) == ("question", "member", "user")
        assert first["content"] == [{"type": "text", "text": TEXT}]
        assert INSTRUCTION not in response.content.decode()
        assert response.json()["about"]["item"] == item.key


async def test_a_watcher_of_the_first_turn_sees_the_question_not_the_instruction(
    scripted, chat_project, member
):
    hang = Hang(then=say("I cannot say."))
    scripted.add(hang)
    client = await client_for(member)
    question = await asked(client)
    await hang.started.wait()
    session = await sync(lambda: Message.objects.get(session_id=question["session"], seq=1).session)()

    ws = await open_socket(session, member)  # joins the running turn: its frames so far are replayed
    seen = await frames_until(ws, "user_message")
    hang.release.set()
    await runner.wait(session.pk)
    await ws.disconnect()

    first = seen[-1]
    assert (first["kind"], first["text"], first["author"]) == ("question", TEXT, "member")
    assert INSTRUCTION not in str(seen)
