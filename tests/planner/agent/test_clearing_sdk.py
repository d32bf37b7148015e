"""Cleared tool results through the real SDK and the fake Messages API: the request carries the
stubs, the stored transcript and its REST reading stay complete (planner/agent/clearing.py)."""

from __future__ import annotations

from typing import Any

import pytest

from planner.agent import clearing
from tests.fakes.messages_api import TextReply, ToolCallSpec, ToolUseReply, history_problems
from tests.planner.agent.test_gateway_sdk import Chat, fake_api  # noqa: F401 (the fixture)
from tests.planner.conftest import sync

pytestmark = pytest.mark.django_db(transaction=True)


def respond(body: dict[str, Any]) -> Any:
    if any(block.get("type") == "tool_result" for block in body["messages"][-1]["content"]):
        return TextReply("Done.")
    return ToolUseReply([ToolCallSpec("get_item", {"key": "BAL-1"}), ToolCallSpec("list_items", {})])


async def test_the_request_carries_stubs_and_the_transcript_stays_whole(
    fake_api,  # noqa: F811
    chat_project,
    member,
    make_item,
    monkeypatch,
):
    monkeypatch.setattr(clearing, "TRIGGER_TOKENS", 0)  # clear whenever a turn opens
    monkeypatch.setattr(clearing, "TURN_TOKENS", 0)  # and whenever a round's results come
    monkeypatch.setattr(clearing, "KEEP_RESULTS", 2)
    monkeypatch.setattr(clearing, "MIN_CLEAR_TOKENS", 1)
    await sync(make_item)(title="Billing export", description="Export the invoices. " * 20)
    fake_api.responder = respond
    chat = await Chat.open(member)
    for text in ("First look", "Second look", "Third look"):
        body = await chat.say(text, member)

    last = fake_api.requests[-1].json["messages"]  # the third turn's second call
    assert history_problems(last) == []
    results = [b for m in last for b in m["content"] if b["type"] == "tool_result"]
    assert [b["content"] == clearing.STUB for b in results] == [True] * 4 + [False] * 2
    assert len([b for m in last for b in m["content"] if b["type"] == "tool_use"]) == 6
    assert "Billing export" in results[-2]["content"]

    # Stored and read back whole: every result, every call's output.
    stored = [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert len(stored) == 6
    assert all(b["content"] != clearing.STUB and "BAL-1" in b["content"] for b in stored)
    assert [c["output"]["title"] for c in body["tool_calls"] if c["name"] == "get_item"] == [
        "Billing export"
    ] * 3
