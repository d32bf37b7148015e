"""Compaction inside turns: when it triggers, what it folds, what the model sees next."""

from __future__ import annotations

import asyncio

import pytest
from django.test import AsyncClient
from prometheus_client.parser import text_string_to_metric_families

from planner.agent import clearing
from planner.agent import gateway as gateway_module
from planner.agent.calls import GatewayError
from planner.agent.gateway import AnthropicGateway
from planner.agent.loop import COMPACTIONS
from planner.agent.messages import Usage
from planner.domain.services.sessions import session_create
from planner.domain.transcripts import transcript
from planner.models import Event, Message, Session, UsageRecord
from tests.fakes.messages_api import FakeMessagesAPI, HangReply, TextReply
from tests.fakes.messages_api import Usage as FakeUsage
from tests.fakes.scripted import assert_valid_history, call, say, tool_results
from tests.planner.conftest import drive, sync
from tests.planner.web.test_api import client_for
from tracker.services.activity import Actor
from tracker.services.projects import project_update

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def small_context(chat_project, owner):
    project_update(
        actor=Actor(user=owner),
        project=chat_project,
        settings={"compact_at_tokens": 1000, "compaction_model": "claude-summarizer"},
    )
    return chat_project


@pytest.fixture
def compacting_session(small_context, member):
    return session_create(user=member, project=small_context)


async def compacted_events(session) -> list[dict]:
    return await sync(
        lambda: [
            e.data for e in Event.objects.filter(session=session, kind="planner.compacted").order_by("pk")
        ]
    )()


async def test_compaction_triggers_exactly_above_the_threshold(planner, model, compacting_session, member):
    session = compacting_session
    # The first answer reports exactly the threshold: no compaction before the next call.
    model.add(say("First answer.", usage=Usage(input_tokens=990, output_tokens=10)))
    await drive(planner, session, member, "One")
    model.add(say("Second answer."))
    await drive(planner, session, member, "Tw")  # 1000 + 2 chars // 4 = 1000: not above
    assert await compacted_events(session) == []
    assert [r.purpose for r in model.requests] == ["turn", "turn"]


async def test_compaction_summarizes_everything_before_the_latest_human_message(
    planner, model, compacting_session, member
):
    session = compacting_session
    model.add(
        call("list_items"), say("Nothing planned yet.", usage=Usage(input_tokens=1200, output_tokens=10))
    )
    await drive(planner, session, member, "What is planned?")
    model.add(say("Summary one: the human asked what is planned; nothing is."))
    model.add(call("list_runnable"), say("Nothing runnable either."))
    await drive(planner, session, member, "What can run?")
    summary_request = model.requests[2]
    assert summary_request.purpose == "compaction"
    assert summary_request.model == "claude-summarizer"
    folded = summary_request.messages[0].text
    assert "What is planned?" in folded
    assert "Planner called list_items" in folded
    assert "What can run?" not in folded
    next_request = model.requests[3]
    assert next_request.messages[0].kind == "summary"
    assert "Summary one" in next_request.messages[0].text
    assert [m.kind for m in next_request.messages[1:]] == ["human"]
    assert next_request.messages[1].text == "What can run?"
    # The current turn's tool call stays with its result in the following request.
    after_tools = model.requests[4]
    assert [m.kind for m in after_tools.messages[1:]] == ["human", "assistant", "tool_results"]
    (event,) = await compacted_events(session)
    stored = await sync(Session.objects.get)(pk=session.pk)
    assert event == {"up_to": stored.summary_up_to, "estimated_tokens": event["estimated_tokens"]}
    assert event["estimated_tokens"] > 1000
    assert stored.summary.startswith("Summary one")


async def test_a_second_compaction_folds_the_earlier_summary(planner, model, compacting_session, member):
    session = compacting_session
    big = Usage(input_tokens=5000, output_tokens=10)
    model.add(say("A1", usage=big))
    await drive(planner, session, member, "Q1")
    model.add(say("S1: asked Q1."), say("A2", usage=big))
    await drive(planner, session, member, "Q2")
    model.add(say("S2: asked Q1 and Q2."), say("A3"))
    await drive(planner, session, member, "Q3")
    second = model.requests[3]
    assert second.purpose == "compaction"
    assert "<previous-summary>\nS1: asked Q1.\n</previous-summary>" in second.messages[0].text
    assert "Q2" in second.messages[0].text
    assert "Q1" not in second.messages[0].text.split("</previous-summary>")[1]
    last = model.requests[-1]
    assert "S2: asked Q1 and Q2." in last.messages[0].text
    assert [m.text for m in last.messages[1:]] == ["Q3"]


async def test_the_transcript_stays_complete_after_compaction(planner, model, compacting_session, member):
    session = compacting_session
    before = COMPACTIONS._value.get()
    model.add(say("A1", usage=Usage(input_tokens=5000)))
    await drive(planner, session, member, "Q1")
    model.add(say("S1"), say("A2"))
    await drive(planner, session, member, "Q2")
    assert COMPACTIONS._value.get() == before + 1
    stored = await sync(Session.objects.get)(pk=session.pk)
    messages = (await sync(transcript)(session=stored))["messages"]
    assert [m["content"][0]["text"] for m in messages] == ["Q1", "A1", "Q2", "A2"]
    body = (await (await client_for(member)).get(f"/api/v1/planner/sessions/{session.pk}")).json()
    assert [m["content"][0]["text"] for m in body["messages"]] == ["Q1", "A1", "Q2", "A2"]
    assert (body["summary"], body["summary_up_to"]) == ("S1", 2)


async def test_a_failing_summary_call_leaves_the_turn_going_uncompacted(
    planner, model, compacting_session, member
):
    session = compacting_session
    model.add(say("A1", usage=Usage(input_tokens=5000)))
    await drive(planner, session, member, "Q1")
    model.add(GatewayError("server", "The Anthropic API failed: overloaded"), say("A2"))
    await drive(planner, session, member, "Q2")
    assert await compacted_events(session) == []
    last = model.requests[-1]
    assert [m.text for m in last.messages] == ["Q1", "A1", "Q2"]
    stored = await sync(Session.objects.get)(pk=session.pk)
    assert (stored.state, stored.summary) == ("idle", "")


async def test_a_compaction_stopped_midway_is_metered(planner, compacting_session, member, monkeypatch):
    """Stop cancels the summary call in flight; what the provider had counted by then is still a
    usage record of the session, as for a stopped answer."""
    session = compacting_session
    summarizing = asyncio.Event()
    consume = gateway_module._consume

    def consumed(answer, kind, event):  # the summary call's usage has come: stop it now
        consume(answer, kind, event)
        if kind == "message_start" and event["message"]["model"] == "claude-summarizer":
            summarizing.set()

    monkeypatch.setattr(gateway_module, "_consume", consumed)
    unfinished = TextReply("Summary that never ends", chunks=4, usage=FakeUsage(3200, 40))
    with FakeMessagesAPI() as fake:
        fake.enqueue(
            TextReply("A1", usage=FakeUsage(5000, 10)),
            HangReply(after_deltas=1, reply=unfinished),
        )
        planner.gateway = AnthropicGateway(base_url=fake.base_url, max_retries=0)
        await drive(planner, session, member, "Q1")
        await planner.send(session_id=session.pk, user=member, text="Q2")
        await asyncio.wait_for(summarizing.wait(), 10)
        assert await planner.stop(session_id=session.pk, user=member)
        await planner.wait(session.pk)
        await planner.settle()
        await planner.gateway.close()
    assert [r.json["model"] for r in fake.requests][1:] == ["claude-summarizer"]  # the summary call
    assert await compacted_events(session) == []
    ended = await sync(lambda: Event.objects.filter(session=session, kind="turn_ended").latest("pk").data)()
    assert ended == {"reason": "stopped"}
    rows = await sync(
        lambda: list(
            UsageRecord.objects.filter(session=session, purpose="compaction").values_list(
                "model", "outcome", "input_tokens"
            )
        )
    )()
    assert rows == [("claude-summarizer", "cancelled", 3200)]


async def scraped(name: str) -> float:
    """The value of the counter ``name`` on ``/metrics`` (0 before it first counts)."""
    text = (await AsyncClient().get("/metrics")).content.decode()
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    return next((s.value for s in samples if s.name == name and not s.labels), 0.0)


async def test_an_empty_summary_goes_on_uncompacted_and_counts_on_metrics(
    planner, model, compacting_session, member
):
    session = compacting_session
    before = await scraped("ballet_planner_compactions_empty_total")
    compacted_before = await scraped("ballet_planner_compactions_total")
    model.add(say("A1", usage=Usage(input_tokens=5000)))
    await drive(planner, session, member, "Q1")
    model.add(say("  \n "), say("A2"))
    await drive(planner, session, member, "Q2")
    assert [r.purpose for r in model.requests] == ["turn", "compaction", "turn"]
    assert [m.text for m in model.requests[-1].messages] == ["Q1", "A1", "Q2"]
    assert await compacted_events(session) == []
    assert await scraped("ballet_planner_compactions_empty_total") == before + 1
    assert await scraped("ballet_planner_compactions_total") == compacted_before


async def test_a_context_too_long_rejection_compacts_and_retries_once(planner, model, session, member):
    model.add(say("A1"))
    await drive(planner, session, member, "Q1")
    too_long = GatewayError(
        "context_too_long", "The conversation is too long for the model's context window."
    )
    model.add(too_long, say("S1"), say("A2"))
    await drive(planner, session, member, "Q2")
    assert [r.purpose for r in model.requests[1:]] == ["turn", "compaction", "turn"]
    assert model.requests[-1].messages[0].kind == "summary"
    assert len(await compacted_events(session)) == 1


async def test_a_context_too_long_rejection_with_nothing_to_compact_fails_the_turn(
    planner, model, session, member
):
    model.add(
        GatewayError("context_too_long", "The conversation is too long for the model's context window.")
    )
    await drive(planner, session, member, "A very long first message")
    ended = await sync(lambda: Event.objects.filter(session=session, kind="turn_ended").get().data)()
    assert ended == {
        "reason": "failed",
        "error": "The conversation is too long for the model's context window.",
    }
    assert await sync(Message.objects.filter(session=session).count)() == 1


async def test_cleared_results_then_a_compaction_keep_every_request_valid(
    planner, model, compacting_session, member, make_item, monkeypatch
):
    monkeypatch.setattr(clearing, "TRIGGER_TOKENS", 0)  # clear whenever a turn opens
    monkeypatch.setattr(clearing, "TURN_TOKENS", 0)  # and whenever a round's results come
    monkeypatch.setattr(clearing, "KEEP_RESULTS", 1)
    monkeypatch.setattr(clearing, "MIN_CLEAR_TOKENS", 1)
    await sync(make_item)(title="Billing export", description="Export the invoices. " * 10)
    session = compacting_session
    model.add(call("get_item", {"key": "BAL-1"}), say("One."))
    await drive(planner, session, member, "One")
    # Turn two's answer reports a context over the threshold: turn three compacts first.
    model.add(call("get_item", {"key": "BAL-1"}), say("Two.", usage=Usage(input_tokens=1200)))
    await drive(planner, session, member, "Two")
    second_round = model.requests[3]  # turn two's call after its result
    assert [r.content == clearing.STUB for r in tool_results(second_round)] == [True, False]
    model.add(say("Summary: BAL-1 was read twice."), call("get_item", {"key": "BAL-1"}), say("Three."))
    await drive(planner, session, member, "Three")
    model.add(call("get_item", {"key": "BAL-1"}), say("Four."))
    await drive(planner, session, member, "Four")
    turns = [r for r in model.requests if r.purpose == "turn"]
    for request in turns:
        assert_valid_history(request)
    summary = next(r for r in model.requests if r.purpose == "compaction")
    assert clearing.STUB not in summary.messages[0].text  # the summary is written from the whole results
    last = turns[-1]
    assert last.messages[0].kind == "summary"
    # After the summary the replay starts afresh: turn three's result is cleared by turn four's.
    assert [r.content == clearing.STUB for r in tool_results(last)] == [True, False]
    stored = await sync(
        lambda: [m.content for m in Message.objects.filter(session=session, kind="tool_results")]
    )()
    assert len(stored) == 4
    assert all(clearing.STUB not in block["content"] for content in stored for block in content)
