"""``ask_question`` and ``get_question`` over MCP (docs/domain.md): asked as over REST, the
planner (a scripted model) answers in the question's sub-chat, and the asker waits for it."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
import redis

from planner.live import question_waits
from planner.live.hub import hub
from planner.live.runner import runner
from planner.mcp_server.tools import SPECS
from planner.models import HumanRequest
from tests.fakes.scripted import Hang, call, say
from tests.planner.api_client import client_for
from tests.planner.conftest import sync
from tests.planner.mcp.conftest import connected, token_of
from tracker.models import ActivityEvent
from tracker.trust import limits as limiter

pytestmark = pytest.mark.django_db(transaction=True)


def output(result) -> dict:
    return json.loads(result.content[0].text)


async def test_an_agent_asks_and_gets_the_planners_answer_within_the_wait(
    scripted, chat_project, member, make_item
):
    item = await sync(make_item)(title="Store sessions", state="ready")
    scripted.add(call("answer_question", {"answer": "PostgreSQL 17."}), say("Answered."))
    token = await sync(token_of)(member)

    async with connected(token) as session:
        asked = await session.call_tool(
            "ask_question",
            {"project": "BAL", "text": "Which database do we use?", "item": item.key, "wait_seconds": 20},
        )
        body = output(asked)
        await runner.wait(uuid.UUID(body["session"]))
        read = output(await session.call_tool("get_question", {"project": "BAL", "id": body["id"]}))

    assert not asked.is_error
    assert (body["status"], body["answer"], body["item"]) == ("answered", "PostgreSQL 17.", item.key)
    assert body["answered_by"] == f"planner:{body['session']}"
    assert (body["asker"], body["project"]) == ("member", "BAL")
    assert read == body
    assert "Which database do we use?" in scripted.turn_requests[0].messages[0].content[0].text
    verbs = await sync(
        lambda: list(
            ActivityEvent.objects.filter(target=f"question:{body['id']}").values_list("verb", flat=True)
        )
    )()
    assert verbs == ["question.asked", "question.answered"]


async def test_ask_question_waits_for_the_planners_answer_given_during_it(scripted, chat_project, member):
    hang = Hang("Looking it up", then=call("answer_question", {"answer": "Redis."}))
    scripted.add(hang, say("Answered."))
    token = await sync(token_of)(member)

    async with connected(token) as session:
        arguments = {"project": "BAL", "text": "Which cache?", "wait_seconds": 20}
        asking = asyncio.ensure_future(session.call_tool("ask_question", arguments))
        await hang.started.wait()
        for _ in range(500):  # until the agent waits for the answer
            if hub.listeners:
                break
            await asyncio.sleep(0.02)
        assert hub.listeners, "the agent never waited"
        hang.release.set()
        asked = await asking
    await runner.wait(uuid.UUID(output(asked)["session"]))

    assert not asked.is_error, asked
    assert (output(asked)["status"], output(asked)["answer"]) == ("answered", "Redis.")


async def test_an_answer_later_than_the_wait_leaves_the_question_open_with_its_id(
    scripted, chat_project, member
):
    scripted.add(call("ask_human", {"question": "Postgres or SQLite?"}))  # the humans are asked: it waits
    token = await sync(token_of)(member)

    async with connected(token) as session:
        asked = output(
            await session.call_tool(
                "ask_question", {"project": "BAL", "text": "Which cache?", "wait_seconds": 0.2}
            )
        )
        await runner.wait(uuid.UUID(asked["session"]))
        read = output(await session.call_tool("get_question", {"project": "BAL", "id": asked["id"]}))

    assert (asked["status"], asked["answer"]) == ("open", "")
    assert isinstance(asked["id"], int)
    assert read["status"] == "open"


async def test_get_question_waits_for_the_answer(scripted, chat_project, member, owner):
    scripted.add(call("ask_human", {"question": "Redis or Memcached?"}))
    token = await sync(token_of)(member)

    async with connected(token) as session:
        arguments = {"project": "BAL", "text": "Which cache?", "wait_seconds": 0}
        asked = output(await session.call_tool("ask_question", arguments))
        sub = uuid.UUID(asked["session"])
        await runner.wait(sub)  # paused on the humans (the test database cannot be read while written)
        arguments = {"project": "BAL", "id": asked["id"], "wait_seconds": 20}
        waiting = asyncio.ensure_future(session.call_tool("get_question", arguments))
        for _ in range(500):  # until the agent waits
            if question_waits.question_topic(asked["id"]) in hub.listeners:
                break
            await asyncio.sleep(0.02)
        assert question_waits.question_topic(asked["id"]) in hub.listeners, "the agent never waited"
        pending = await sync(lambda: HumanRequest.objects.get(session_id=sub).pk)()
        scripted.add(call("answer_question", {"answer": "Redis, says the owner."}), say("Answered."))
        await runner.reply(session_id=sub, user=owner, request=pending, text="Redis")
        waited = output(await waiting)
        await runner.wait(sub)

    assert asked["status"] == "open"
    assert (waited["status"], waited["answer"]) == ("answered", "Redis, says the owner.")


async def test_a_viewer_may_not_ask(scripted, chat_project, viewer):
    token = await sync(token_of)(viewer)

    async with connected(token) as session:
        refused = await session.call_tool("ask_question", {"project": "BAL", "text": "May I?"})

    assert refused.is_error
    assert output(refused) == {
        "error": {"code": "permission_denied", "message": "You need planner.chat in BAL to do this."}
    }
    assert scripted.requests == []


async def test_a_question_of_a_project_the_user_cannot_read_is_not_found(
    scripted, chat_project, member, users, other_project
):
    scripted.add(call("ask_human", {"question": "Hm?"}))
    asked = output(await _ask(await sync(token_of)(member), "Which cache?"))
    await runner.wait(uuid.UUID(asked["session"]))
    token = await sync(token_of)(users["stranger"])

    async with connected(token) as session:
        hidden = await session.call_tool("get_question", {"project": "BAL", "id": asked["id"]})
        elsewhere = await session.call_tool("ask_question", {"project": "OTH", "text": "Anything?"})
        unknown = await session.call_tool("get_question", {"project": "ZZZ", "id": asked["id"]})

    assert output(hidden) == {"error": {"code": "not_found", "message": "Project BAL not found."}}
    assert output(elsewhere) == {"error": {"code": "not_found", "message": "Project OTH not found."}}
    assert output(unknown) == {"error": {"code": "not_found", "message": "Project ZZZ not found."}}


async def _ask(token: str, text: str):
    async with connected(token) as session:
        return await session.call_tool("ask_question", {"project": "BAL", "text": text, "wait_seconds": 0})


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("ask_question", {"project": "BAL"}, "'text' is a required property"),
        ("ask_question", {"project": "BAL", "text": ""}, "text: '' should be non-empty"),
        ("ask_question", {"project": "BAL", "text": "x" * 8001}, "is too long"),
        (
            "ask_question",
            {"project": "BAL", "text": "Why?", "wait_seconds": 61},
            "greater than the maximum of 60",
        ),
        (
            "ask_question",
            {"project": "BAL", "text": "Why?", "wait_seconds": "soon"},
            "is not of type 'number'",
        ),
        ("ask_question", {"project": "BAL", "text": "Why?", "item": "BAL-99"}, "BAL-99 not found"),
        ("ask_question", {"project": "BAL", "text": "Why\u0000?"}, "NUL"),
        ("ask_question", {"project": "BAL", "text": "Why?", "asker": "owner"}, "Additional properties"),
        ("get_question", {"project": "BAL"}, "'id' is a required property"),
        ("get_question", {"project": "BAL", "id": 424242}, "Question not found."),
        ("get_question", {"project": "BAL", "id": "1"}, "is not of type 'integer'"),
    ],
)
async def test_bad_question_input_is_a_readable_tool_error(
    scripted, chat_project, member, name, arguments, message
):
    token = await sync(token_of)(member)

    async with connected(token) as session:
        result = await session.call_tool(name, arguments)

    assert result.is_error
    assert message in json.dumps(output(result), ensure_ascii=False)  # the error's message, or a field's
    assert scripted.requests == []


class _DownCache:
    """The shared cache while Redis is down: every call fails as django's RedisCache fails then."""

    def __getattr__(self, name: str) -> object:
        def fail(*args: object, **kwargs: object) -> None:
            raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

        return fail


async def test_while_requests_cannot_be_counted_reads_are_served_and_questions_refused_503(
    scripted, chat_project, member, monkeypatch
):
    token = await sync(token_of)(member)
    rest = await client_for(member)
    monkeypatch.setattr(limiter, "cache", _DownCache())
    listed = await rest.get("/api/v1/projects/BAL/questions/")
    posted = await rest.post("/api/v1/projects/BAL/questions/", {"text": "Which cache?"})

    async with connected(token) as session:
        tools = await session.list_tools()
        asked = await session.call_tool("ask_question", {"project": "BAL", "text": "Which cache?"})
        claimed = await session.call_tool("claim_ticket", {"project": "BAL", "item": "BAL-1"})

    assert (claimed.is_error, output(claimed)["error"]["code"]) == (True, "unavailable")
    assert (listed.status_code, posted.status_code) == (200, 503)
    assert posted.json()["error"]["code"] == "unavailable"
    assert len(tools.tools) == len(SPECS)
    assert (asked.is_error, output(asked)["error"]["code"]) == (True, "unavailable")
    assert "Redis" in output(asked)["error"]["message"]
    assert scripted.requests == []  # nothing was asked


async def test_an_agent_lists_its_questions_and_withdraws_one_whose_sub_chat_waits(
    scripted, chat_project, member, viewer, owner
):
    scripted.add(call("ask_human", {"question": "Postgres or SQLite?"}))  # its sub-chat waits for a human
    scripted.add(call("answer_question", {"answer": "Redis."}), say("Answered."))
    token, other = await sync(token_of)(member), await sync(token_of)(viewer)

    async with connected(token) as session:
        waiting = output(
            await session.call_tool(
                "ask_question", {"project": "BAL", "text": "Which cache?", "wait_seconds": 0}
            )
        )
        await runner.wait(uuid.UUID(waiting["session"]))
        answered = output(
            await session.call_tool(
                "ask_question", {"project": "BAL", "text": "Which queue?", "wait_seconds": 30}
            )
        )
        mine = output(await session.call_tool("list_questions", {"project": "BAL", "mine": True}))
        open_ = output(
            await session.call_tool("list_questions", {"project": "BAL", "status": "open", "limit": 1})
        )
        paged = output(await session.call_tool("list_questions", {"project": "BAL", "limit": 1, "offset": 1}))
    async with connected(other) as session:
        not_theirs = await session.call_tool("withdraw_question", {"project": "BAL", "id": waiting["id"]})
    async with connected(token) as session:
        withdrawn = output(
            await session.call_tool("withdraw_question", {"project": "BAL", "id": waiting["id"]})
        )
        again = await session.call_tool("withdraw_question", {"project": "BAL", "id": waiting["id"]})
        settled = await session.call_tool("withdraw_question", {"project": "BAL", "id": answered["id"]})
        bad = await session.call_tool("list_questions", {"project": "BAL", "limit": 201})

    assert answered["status"] == "answered"
    assert (mine["count"], [q["id"] for q in mine["results"]]) == (2, [answered["id"], waiting["id"]])
    assert (open_["count"], [q["id"] for q in open_["results"]]) == (1, [waiting["id"]])
    assert [q["id"] for q in paged["results"]] == [waiting["id"]]
    assert not_theirs.is_error
    assert output(not_theirs)["error"]["code"] in ("permission_denied", "missing_scope")
    assert (withdrawn["id"], withdrawn["status"]) == (waiting["id"], "withdrawn")
    assert again.is_error
    assert "already withdrawn" in output(again)["error"]["message"]
    assert settled.is_error
    assert bad.is_error
    assert output(bad)["error"]["code"] == "invalid_input"
    assert await sync(lambda: HumanRequest.objects.get(session_id=waiting["session"]).status)() == "cancelled"
