"""``ask_question`` over MCP remembers answers (docs/domain.md#agents-questions): a question meaning
what an answered one of the same item meant gets its answer at once, unless ``fresh``."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from planner.live.runner import runner
from planner.models import Question, QuestionStatus, Session
from tests.fakes.scripted import call, say
from tests.planner.conftest import sync
from tests.planner.mcp.conftest import connected, token_of

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "Which database does the login service use?"


def output(result) -> dict:
    return json.loads(result.content[0].text)


def answered(project, asker, item=None) -> Question:
    return Question.objects.create(
        project=project,
        asker=asker,
        item=item,
        text=TEXT,
        status=QuestionStatus.ANSWERED,
        answer="PostgreSQL 17.",
        answered_by="user:maintainer",
        human=User.objects.get(username="maintainer"),
        answered_at=timezone.now(),
        started=True,
    )


async def test_ask_question_returns_a_remembered_answer_at_once(
    scripted, chat_project, member, owner, make_item
):
    item = await sync(make_item)(title="Move sessions", state="ready")
    earlier = await sync(answered)(chat_project, owner, item)
    token = await sync(token_of)(member)

    async with connected(token) as session:
        asked = await session.call_tool(
            "ask_question", {"project": "BAL", "text": TEXT.upper(), "item": item.key, "wait_seconds": 60}
        )
        body = output(asked)
        read = output(
            await session.call_tool("get_question", {"project": "BAL", "id": body["id"], "wait_seconds": 60})
        )

    assert not asked.is_error, asked
    assert (body["status"], body["answer"], body["reused"], body["reused_from"]) == (
        "answered",
        "PostgreSQL 17.",
        True,
        earlier.pk,
    )
    assert (body["answered_by"], body["session"], body["item"]) == ("user:maintainer", None, item.key)
    assert read == body
    assert scripted.requests == []  # no model call
    assert await sync(Session.objects.count)() == 0  # no sub-chat


async def test_fresh_opens_a_sub_chat_even_so(scripted, chat_project, member, owner):
    await sync(answered)(chat_project, owner)
    scripted.add(call("answer_question", {"answer": "PostgreSQL 18 now."}), say("Answered."))
    token = await sync(token_of)(member)

    async with connected(token) as session:
        asked = await session.call_tool(
            "ask_question", {"project": "BAL", "text": TEXT, "fresh": True, "wait_seconds": 20}
        )
        body = output(asked)
        await runner.wait(uuid.UUID(body["session"]))
        refused = await session.call_tool("ask_question", {"project": "BAL", "text": TEXT, "fresh": "yes"})

    assert (body["answer"], body["reused"], body["reused_from"]) == ("PostgreSQL 18 now.", False, None)
    assert refused.is_error
    assert "fresh" in output(refused)["error"]["message"]
