"""Bad input in the planner (docs/trust.md): hostile or broken tool calls and messages get clear errors;
the turn goes on."""

from __future__ import annotations

import dataclasses
import json
import logging

import pytest
from django.db import DatabaseError

from planner.domain.services.sessions import session_create
from planner.domain.tools import TOOLS
from planner.models import Event, Message, Session, ToolCall
from tests.fakes.scripted import call, say, tool_results
from tests.planner.conftest import drive, sync
from tracker.errors import ValidationError
from tracker.models import Item
from tracker.services.activity import Actor
from tracker.services.items import item_create

pytestmark = pytest.mark.django_db(transaction=True)


async def _ended(session) -> tuple[str, dict]:
    event = await sync(lambda: Event.objects.filter(session=session, kind="turn_ended").latest("pk"))()
    return event.kind, event.data


def _error(result) -> dict:
    assert result.is_error, result
    return json.loads(result.content)["error"]


@pytest.mark.parametrize(
    "failure",
    [RuntimeError("secret internals /etc/ballet"), DatabaseError("relation tracker_x does not exist")],
    ids=["RuntimeError", "DatabaseError"],
)
async def test_a_tool_that_raises_gives_the_model_an_internal_error_and_the_turn_goes_on(
    planner, model, session, member, owner, chat_project, monkeypatch, caplog, failure
):
    def broken(context, arguments):
        # It writes first: the failure must leave nothing of it behind.
        item_create(actor=Actor(user=owner), project=chat_project, kind="ticket", fields={"title": "Half"})
        raise failure

    tool = "create_knowledge"  # a tool that writes, so it runs in a transaction of its own
    monkeypatch.setitem(TOOLS, tool, dataclasses.replace(TOOLS[tool], handler=broken))
    model.add(
        call(tool, {"kind": "note", "title": "Plan", "body": "..."}),
        say("The tool failed; let me try something else."),
    )
    with caplog.at_level(logging.ERROR, logger="planner.domain.tools.base"):
        await drive(planner, session, member, "What is planned?")

    result = tool_results(model.turn_requests[1])[0]
    error = _error(result)
    assert error["code"] == "internal_error"
    assert tool in error["message"]
    assert str(failure) not in result.content
    assert "Traceback" not in result.content
    assert await _ended(session) == ("turn_ended", {"reason": "completed"})
    assert (await sync(Session.objects.get)(pk=session.pk)).state == "idle"
    assert not await sync(Item.objects.filter(title="Half").exists)()
    record = next(r for r in caplog.records if r.name == "planner.domain.tools.base")
    assert record.exc_info is not None
    assert record.exc_info[1] is failure
    stored = await sync(ToolCall.objects.get)(session=session)
    assert (stored.is_error, stored.output["error"]["code"]) == (True, "internal_error")


@pytest.mark.parametrize("key", ["BAL-\u00b2", "BAL-\u0663", "BAL-\uff11", "BAL-99999999999999999999"])
async def test_an_item_key_of_non_ascii_or_too_many_digits_is_refused(
    planner, model, session, member, make_item, key
):
    for title in ("One", "Two", "Three"):
        await sync(make_item)(title=title)
    model.add(call("get_item", {"key": key}), say("No such item."))
    await drive(planner, session, member, f"Read {key}")

    assert _error(tool_results(model.turn_requests[1])[0])["code"] in {"invalid_input", "not_found"}
    assert await _ended(session) == ("turn_ended", {"reason": "completed"})


async def test_a_changeset_naming_a_non_ascii_key_is_a_field_error(
    planner, model, session, member, make_item
):
    await sync(make_item)(title="Two")
    await sync(make_item)(title="Three")
    operations = [{"op": "add_dependency", "blocker": "BAL-\u00b2", "blocked": "BAL-1"}]
    model.add(call("propose_changeset", {"title": "Deps", "operations": operations}), say("Refused."))
    await drive(planner, session, member, "Link them")

    error = _error(tool_results(model.turn_requests[1])[0])
    assert error["code"] == "invalid"
    assert "operations[0].blocker" in error["fields"]
    assert await _ended(session) == ("turn_ended", {"reason": "completed"})


@pytest.mark.parametrize(
    ("name", "arguments", "where"),
    [
        ("get_item", {"key": "BAL-1\x00"}, "key"),
        ("search_project", {"query": "login\x00"}, "query"),
        (
            "propose_changeset",
            {"title": "T", "operations": [{"op": "create", "kind": "ticket", "fields": {"title": "a\x00b"}}]},
            "operations[0].fields.title",
        ),
        ("create_knowledge", {"kind": "note", "title": "N\x00", "body": "B"}, "title"),
    ],
)
async def test_a_nul_in_a_tool_input_is_invalid_input_and_the_turn_goes_on(
    planner, model, session, member, make_item, name, arguments, where
):
    await sync(make_item)(title="One")
    model.add(call(name, arguments), say("That input was refused."))
    await drive(planner, session, member, "Go")

    error = _error(tool_results(model.turn_requests[1])[0])
    assert error["code"] == "invalid_input"
    assert where in error["message"]
    assert await _ended(session) == ("turn_ended", {"reason": "completed"})
    kinds = await sync(lambda: list(Message.objects.filter(session=session).values_list("kind", flat=True)))()
    assert kinds[-2:] == ["tool_results", "assistant"]


async def test_a_message_with_a_nul_is_refused_before_a_turn_starts(planner, model, session, member):
    with pytest.raises(ValidationError) as refused:
        await planner.send(session_id=session.pk, user=member, text="Hello\x00there")

    assert refused.value.errors == {"text": ["NUL characters are not allowed."]}
    assert model.requests == []
    assert not await sync(Message.objects.filter(session=session).exists)()


async def test_a_nul_the_model_writes_is_stored_and_the_turn_completes(planner, model, session, member):
    model.add(call("list_runnable", {"note\x00": "x"}, text="Let me\x00 look"), say("Done\x00."))
    await drive(planner, session, member, "Go")

    assert await _ended(session) == ("turn_ended", {"reason": "completed"})
    assert _error(tool_results(model.turn_requests[1])[0])["code"] == "invalid_input"
    texts = await sync(
        lambda: [m.content for m in Message.objects.filter(session=session, kind="assistant").order_by("seq")]
    )()
    assert texts[-1] == [{"type": "text", "text": "Done\ufffd."}]
    assert texts[0][0] == {"type": "text", "text": "Let me\ufffd look"}


def test_a_session_title_with_a_nul_is_refused_by_the_service(chat_project, member):
    with pytest.raises(ValidationError) as refused:
        session_create(user=member, project=chat_project, title="Plan\x00")
    assert refused.value.errors == {"title": ["NUL characters are not allowed."]}
    assert not Session.objects.exists()
