"""API keys on ``/mcp``: a key authenticates as its user, each tool within the key's scopes (a
refusal is a tool error naming the scope), and a revoked or expired key, or one whose user was
deactivated, is refused 401 at the next request."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from planner.live.runner import runner
from planner.mcp_server.tools import READ_TOOLS, SCOPES, SPECS
from planner.models import Question
from tests.factories import make_key
from tests.fakes.scripted import call, say
from tests.planner.conftest import sync
from tests.planner.mcp.conftest import connected
from tests.planner.mcp.test_server import refusal
from tracker.models import ApiKey
from tracker.services.keys import key_revoke

pytestmark = pytest.mark.django_db(transaction=True)


def output(result) -> dict:
    return json.loads(result.content[0].text)


def test_every_tool_names_the_scope_a_key_needs():
    assert {
        **dict.fromkeys(READ_TOOLS, "read"),
        "list_changesets": "read",
        "propose_changeset": "plan",
        "create_knowledge": "plan",
        "update_knowledge": "plan",
        "ask_question": "ask",
        "get_question": "read",
        "list_questions": "read",
        "withdraw_question": "ask",
        "claim_ticket": "work",
        "get_brief": "read",
        "report": "work",
        "release_claim": "work",
        "wait_for_events": "read",
    } == SCOPES
    assert SCOPES.keys() == SPECS.keys()


@pytest.mark.parametrize("scheme", ["Bearer", "Token", "Api-Key"])
async def test_a_key_authenticates_mcp_as_its_user(users, make_item, scheme):
    await sync(make_item)(title="Export CSV", state="ready")
    key = await sync(make_key)(users["viewer"], "read")

    async with connected(key, scheme=scheme) as session:
        listed = output(await session.call_tool("list_runnable", {"project": "BAL"}))

    assert [ticket["title"] for ticket in listed["results"]] == ["Export CSV"]


async def test_a_read_key_cannot_ask_and_is_told_which_scope_it_lacks(users, chat_project):
    key = await sync(make_key)(users["member"], "read")

    async with connected(key) as session:
        asked = await session.call_tool("ask_question", {"project": "BAL", "text": "Why?"})

    assert asked.is_error
    assert output(asked)["error"] == {
        "code": "missing_scope",
        "message": "This API key lacks the ask scope, which the tool ask_question needs (it has read); "
        "create a key with ask at /keys/.",
    }
    assert not await sync(Question.objects.exists)()


async def test_an_ask_key_asks_but_reads_no_plan(scripted, users, chat_project):
    scripted.add(call("answer_question", {"answer": "Yes."}), say("Answered."))
    key = await sync(make_key)(users["member"], "ask")

    async with connected(key) as session:
        asked = output(await session.call_tool("ask_question", {"project": "BAL", "text": "Ship it?"}))
        await runner.wait(uuid.UUID(asked["session"]))
        read = await session.call_tool("get_question", {"project": "BAL", "id": asked["id"]})
        runnable = await session.call_tool("list_runnable", {"project": "BAL"})

    assert (asked["status"], asked["answer"]) == ("answered", "Yes.")
    assert read.is_error
    assert runnable.is_error
    assert "lacks the read scope, which the tool list_runnable needs" in output(runnable)["error"]["message"]


async def test_a_key_never_goes_beyond_its_users_roles(users, chat_project):
    key = await sync(make_key)(users["viewer"], "read", "ask")

    async with connected(key) as session:
        asked = await session.call_tool("ask_question", {"project": "BAL", "text": "Why?"})

    assert output(asked)["error"]["code"] == "permission_denied"


@pytest.mark.parametrize("ending", ["revoked", "expired", "deactivated"])
async def test_a_key_that_ended_is_refused_401_at_the_next_request(users, ending):
    member = users["member"]
    key = await sync(make_key)(member, "read")
    assert (await refusal({"Authorization": f"Bearer {key}"}))[0] == 200

    row = await ApiKey.objects.aget(user=member)
    if ending == "revoked":
        await sync(key_revoke)(key=row)
    elif ending == "expired":
        await ApiKey.objects.filter(pk=row.pk).aupdate(expires_at=timezone.now() - timedelta(seconds=1))
    else:
        member.is_active = False
        await member.asave(update_fields=["is_active"])
    status, body, _ = await refusal({"Authorization": f"Bearer {key}"})

    assert status == 401
    assert body["error"]["data"]["code"] == "authentication_failed"
    expected = {
        "revoked": f"The API key {row.prefix} (agent) was revoked; create another at /keys/.",
        "deactivated": "User inactive or deleted.",
    }
    if ending in expected:
        assert body["error"]["message"] == expected[ending]
    else:
        assert body["error"]["message"].startswith(f"The API key {row.prefix} (agent) expired at ")
