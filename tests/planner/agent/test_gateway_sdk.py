"""The real ``anthropic`` SDK against the local fake Messages API, driven through REST."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import AsyncIterator

import pytest
from django.test import AsyncClient

from planner.agent.frames import Frame
from planner.agent.gateway import DROPPED, STALLED, AnthropicGateway
from planner.live.runner import runner
from planner.models import UsageRecord
from tests.fakes.messages_api import (
    BreakOffReply,
    ErrorReply,
    FakeMessagesAPI,
    HangReply,
    StreamReply,
    TextReply,
    ThinkingBlockSpec,
    ToolCallSpec,
    ToolUseReply,
    Usage,
)
from tests.planner.conftest import sync
from tests.planner.web.test_api import client_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def fake_api() -> AsyncIterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as fake:
        previous = runner._gateway
        gateway = runner.gateway = AnthropicGateway(base_url=fake.base_url, max_retries=2)
        yield fake
        await gateway.close()
        runner.gateway = previous


class Chat:
    """A session opened and driven over REST, with a watcher collecting its frames."""

    def __init__(self, client, session_id: str) -> None:
        self.client = client
        self.id = session_id
        self.frames: list[Frame] = []

    @classmethod
    async def open(cls, user) -> Chat:
        client = await client_for(user)
        created = await client.post("/api/v1/planner/sessions/", {"project": "BAL"})
        return cls(client, created.json()["id"])

    async def say(self, text: str, user) -> dict:
        watching = asyncio.Event()
        watcher = asyncio.ensure_future(self._watch(user, watching))
        await asyncio.wait_for(watching.wait(), 5)  # attached before the turn can end
        response = await self.client.post(f"/api/v1/planner/sessions/{self.id}/messages/", {"text": text})
        assert response.status_code == 202, response.content
        await runner.wait(uuid.UUID(self.id))
        await asyncio.wait_for(watcher, 5)
        return (await self.client.get(f"/api/v1/planner/sessions/{self.id}")).json()

    async def _watch(self, user, watching: asyncio.Event) -> None:
        async for frame in runner.watch(session_id=uuid.UUID(self.id), user=user):
            watching.set()
            self.frames.append(frame)
            if frame["type"] == "turn_ended":
                return

    def texts(self) -> str:
        return "".join(f["text"] for f in self.frames if f["type"] == "text_delta")


async def test_streamed_text_and_usage(fake_api, chat_project, member):
    fake_api.enqueue(
        TextReply(
            "Hello from the planner.",
            chunks=5,
            usage=Usage(input_tokens=321, output_tokens=17, cache_read_input_tokens=40),
        )
    )
    chat = await Chat.open(member)
    body = await chat.say("Hi", member)
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "Hello from the planner."}]
    assert chat.texts() == "Hello from the planner."
    assert [f["type"] for f in chat.frames][:3] == ["state", "user_message", "turn_started"]
    # Five deltas streamed; a watcher that is behind gets a run of them as one frame.
    assert 1 <= len([f for f in chat.frames if f["type"] == "text_delta"]) <= 5
    record = await sync(UsageRecord.objects.get)(purpose="turn")
    assert (record.input_tokens, record.output_tokens, record.cache_read_input_tokens) == (321, 17, 40)
    # The first turn is followed by the title call, on the title model (planner/live/titles.py).
    title = await sync(UsageRecord.objects.get)(purpose="title")
    assert (title.model, title.outcome) == ("claude-haiku-4-5", "ok")
    assert len(fake_api.title_requests) == 1
    sent = fake_api.requests[0].json
    assert sent["stream"] is True
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert sent["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert len(sent["tools"]) == 14  # the twelve, start_subchat and ask_human
    assert fake_api.requests[0].headers["authorization"] == "Bearer sk-test"
    metrics = (await AsyncClient().get("/metrics")).content.decode()
    assert 'ballet_llm_tokens_total{kind="input"}' in metrics
    assert 'ballet_llm_request_seconds_bucket{le="0.05",outcome="ok",purpose="turn"}' in metrics


async def test_tool_use_split_over_several_json_deltas(fake_api, chat_project, member, make_item):
    await sync(make_item)(title="Billing export", state="ready")
    fake_api.enqueue(
        ToolUseReply([ToolCallSpec("get_item", {"key": "BAL-1"}, json_chunks=5)], text_before="Let me look."),
        TextReply("BAL-1 is ready.", chunks=2),
    )
    chat = await Chat.open(member)
    body = await chat.say("Tell me about BAL-1", member)
    (tool_call,) = body["tool_calls"]
    assert (tool_call["name"], tool_call["input"], tool_call["is_error"]) == (
        "get_item",
        {"key": "BAL-1"},
        False,
    )
    assert tool_call["output"]["title"] == "Billing export"
    assert [f["type"] for f in chat.frames if f["type"].startswith("tool")] == ["tool_call", "tool_result"]
    second = fake_api.requests[1].json["messages"]
    assert second[-1]["content"][0]["type"] == "tool_result"
    assert second[-2]["content"][-1]["type"] == "tool_use"


async def test_a_529_then_success_is_retried_by_the_sdk(fake_api, chat_project, member):
    fake_api.enqueue(ErrorReply(529), TextReply("Made it."))
    chat = await Chat.open(member)
    body = await chat.say("Hi", member)
    assert body["messages"][-1]["content"][0]["text"] == "Made it."
    assert len(fake_api.requests) == 2
    assert body["events"][-1]["data"] == {"reason": "completed"}


async def test_a_stream_that_breaks_off_is_retried_and_watchers_drop_the_partial_text(
    fake_api, chat_project, member
):
    fake_api.enqueue(
        BreakOffReply(after_deltas=2, reply=TextReply("Partial text that breaks", chunks=4)),
        TextReply("The full answer.", chunks=3),
    )
    chat = await Chat.open(member)
    body = await chat.say("Hi", member)
    assert body["messages"][-1]["content"][0]["text"] == "The full answer."
    types = [f["type"] for f in chat.frames]
    reset = types.index("text_reset")
    after = "".join(f["text"] for f in chat.frames[reset:] if f["type"] == "text_delta")
    assert after == "The full answer."
    turn_calls = UsageRecord.objects.filter(purpose="turn")  # the title's call comes after
    outcomes = await sync(lambda: sorted(turn_calls.values_list("outcome", flat=True)))()
    assert outcomes == ["error", "ok"]


async def test_a_connection_that_drops_mid_answer_is_retried_and_watchers_drop_the_partial_text(
    fake_api, chat_project, member
):
    fake_api.enqueue(
        BreakOffReply(after_deltas=2, drop=True, reply=TextReply("Partial text that drops", chunks=4)),
        TextReply("The full answer.", chunks=3),
    )
    chat = await Chat.open(member)
    body = await chat.say("Hi", member)
    assert fake_api.requests[0].outcome == "dropped"
    assert body["messages"][-1]["content"][0]["text"] == "The full answer."
    reset = [f["type"] for f in chat.frames].index("text_reset")
    partial = "".join(f["text"] for f in chat.frames[:reset] if f["type"] == "text_delta")
    assert partial  # two of its four deltas
    assert "Partial text that drops".startswith(partial)
    after = "".join(f["text"] for f in chat.frames[reset:] if f["type"] == "text_delta")
    assert after == "The full answer."
    turn_calls = UsageRecord.objects.filter(purpose="turn").order_by("pk")
    calls = await sync(lambda: list(turn_calls.values_list("outcome", "error")))()
    assert [outcome for outcome, _ in calls] == ["error", "ok"]
    assert calls[0][1].startswith("the stream broke off: ")


async def test_a_connection_that_drops_every_time_fails_the_turn_readably(fake_api, chat_project, member):
    dropping = BreakOffReply(after_deltas=1, drop=True, reply=TextReply("Never finished", chunks=2))
    fake_api.enqueue(dropping, dropping, dropping)
    chat = await Chat.open(member)
    body = await chat.say("Hi", member)
    assert [r.outcome for r in fake_api.requests] == ["dropped"] * 3
    assert body["state"] == "idle"
    assert body["events"][-1]["data"] == {"reason": "failed", "error": DROPPED}
    assert chat.frames[-1] == {**chat.frames[-1], "type": "turn_ended", "reason": "failed"}


async def test_a_stream_that_stalls_past_the_read_timeout_fails_the_turn_readably_at_once(
    fake_api, chat_project, member
):
    runner.gateway = gateway = AnthropicGateway(base_url=fake_api.base_url, max_retries=0, timeout=0.5)
    try:
        fake_api.enqueue(HangReply(after_deltas=1, reply=TextReply("Half an answer", chunks=2)))
        chat = await Chat.open(member)
        body = await chat.say("Hi", member)
    finally:
        await gateway.close()
    assert len(fake_api.requests) == 1  # not asked again: silent that long, it is not coming back
    assert body["events"][-1]["data"] == {"reason": "failed", "error": STALLED}
    record = await sync(UsageRecord.objects.get)(purpose="turn")
    assert (record.outcome, record.error) == ("error", STALLED)


async def test_a_401_fails_the_turn_with_a_readable_reason(fake_api, chat_project, member):
    fake_api.enqueue(ErrorReply(401))
    chat = await Chat.open(member)
    body = await chat.say("Hi", member)
    assert body["state"] == "idle"
    assert body["events"][-1]["data"] == {
        "reason": "failed",
        "error": "The Anthropic API refused the credential (401): check the project's API key.",
    }
    assert chat.frames[-1] == {**chat.frames[-1], "type": "turn_ended", "reason": "failed"}
    assert len(fake_api.requests) == 1


async def test_stop_cancels_the_in_flight_http_call(fake_api, chat_project, member):
    fake_api.enqueue(
        HangReply(
            after_deltas=2,
            reply=TextReply("Thinking about it forever", chunks=["Thinking ", "about ", "it ", "forever"]),
        )
    )
    chat = await Chat.open(member)
    await chat.client.post(f"/api/v1/planner/sessions/{chat.id}/messages/", {"text": "Hi"})
    for _ in range(200):
        if fake_api.requests and fake_api.requests[0].outcome is not None:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    stopped = await chat.client.post(f"/api/v1/planner/sessions/{chat.id}/stop/")
    assert stopped.json() == {"stopped": True}
    await runner.wait(uuid.UUID(chat.id))
    body = (await chat.client.get(f"/api/v1/planner/sessions/{chat.id}")).json()
    assert body["events"][-1]["data"] == {"reason": "stopped"}
    assert body["messages"][-1]["content"][0]["text"] == "Thinking about "
    assert await sync(lambda: UsageRecord.objects.get().outcome)() == "cancelled"


async def test_usage_endpoint_sums_what_the_fake_reported(fake_api, chat_project, member):
    fake_api.enqueue(
        ToolUseReply(
            [ToolCallSpec("list_items", {})],
            usage=Usage(input_tokens=1000, output_tokens=50, cache_creation_input_tokens=800),
        ),
        TextReply("Done.", usage=Usage(input_tokens=1100, output_tokens=30, cache_read_input_tokens=800)),
        TextReply("Again.", usage=Usage(input_tokens=1200, output_tokens=10, cache_read_input_tokens=800)),
    )
    chat = await Chat.open(member)
    await chat.say("One", member)
    await chat.say("Two", member)
    rows = {r["model"]: r for r in (await chat.client.get("/api/v1/projects/BAL/usage/")).json()["results"]}
    assert rows.keys() == {"claude-sonnet-5-5", "claude-haiku-4-5"}
    assert rows["claude-haiku-4-5"]["calls"] == 1  # the title, after the first turn (planner/live/titles.py)
    row = rows["claude-sonnet-5-5"]
    assert row["calls"] == 3
    assert row["input_tokens"] == 3300
    assert row["output_tokens"] == 90
    assert row["cache_creation_input_tokens"] == 800
    assert row["cache_read_input_tokens"] == 1600
    assert row["model"] == "claude-sonnet-5-5"


def roles_alternate_without_tool_use(messages: list[dict]) -> bool:
    roles = [m["role"] for m in messages]
    uses = [b for m in messages for b in m["content"] if b["type"] == "tool_use"]
    return roles[0] == "user" and all(a != b for a, b in itertools.pairwise(roles)) and not uses


async def test_an_answer_cut_off_at_max_tokens_fails_the_turn_and_keeps_only_its_text(
    fake_api, chat_project, member
):
    fake_api.enqueue(
        ToolUseReply(
            [ToolCallSpec("get_item", id="toolu_cut", json_chunks=['{"key": "BA'])],
            text_before="Let me look that up.",
            stop_reason="max_tokens",
        ),
        TextReply("BAL-1 is the login page."),
    )
    chat = await Chat.open(member)
    body = await chat.say("Tell me about BAL-1", member)
    error = (
        "The answer hit the model's output limit of 8,192 tokens (max_tokens) and was cut off. "
        "Ask for a shorter answer; the server's [planner] max_output_tokens sets the limit."
    )
    assert body["state"] == "idle"
    assert body["events"][-1]["data"] == {"reason": "failed", "error": error}
    assert chat.frames[-1] == {**chat.frames[-1], "type": "turn_ended", "reason": "failed", "error": error}
    # The text the human saw is kept; the half-written call never runs nor stays unanswered.
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "Let me look that up."}]
    assert body["tool_calls"] == []
    assert not [f for f in chat.frames if f["type"] in ("tool_call", "tool_result")]

    body = await chat.say("Just the title, please", member)
    assert body["events"][-1]["data"] == {"reason": "completed"}
    sent = fake_api.requests[1].json["messages"]
    assert roles_alternate_without_tool_use(sent)
    assert sent[1]["content"] == [{"type": "text", "text": "Let me look that up."}]


async def test_a_refusal_fails_the_turn_with_a_readable_reason(fake_api, chat_project, member):
    fake_api.enqueue(TextReply("I can't help with that.", stop_reason="refusal"))
    chat = await Chat.open(member)
    body = await chat.say("Something it refuses", member)
    assert body["state"] == "idle"
    assert body["events"][-1]["data"] == {
        "reason": "failed",
        "error": "The model declined to answer (refusal); rephrase the request or start a new chat.",
    }
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "I can't help with that."}]


async def test_a_thinking_block_fails_the_turn_readably_and_the_next_message_works(
    fake_api, chat_project, member
):
    fake_api.enqueue(
        StreamReply([ThinkingBlockSpec("Weigh it.", chunks=2), "Option B."]),
        TextReply("Option B, without thinking."),
    )
    chat = await Chat.open(member)
    body = await chat.say("Which option?", member)
    assert body["state"] == "idle"
    assert body["events"][-1]["data"] == {
        "reason": "failed",
        "error": "The model answered with content Ballet cannot handle yet (a thinking block); "
        "the answer was not used.",
    }
    assert [m["kind"] for m in body["messages"]] == ["human"]
    outcomes = await sync(lambda: list(UsageRecord.objects.values_list("outcome", flat=True)))()
    assert outcomes == ["error"]

    body = await chat.say("Which option, then?", member)
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "Option B, without thinking."}]
    assert roles_alternate_without_tool_use(fake_api.requests[1].json["messages"])
