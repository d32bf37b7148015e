"""The gateway reads the stream as the SDK does.

The gateway decodes the stream's raw server-sent events itself (``planner/agent/gateway.py`` says
why). Each case here is served twice by the local fake Messages API: once to the gateway,
once to the SDK's own accumulator (``messages.stream()`` → ``get_final_message()``, built on
``anthropic.lib.streaming.accumulate_event``), and both must end with the same blocks, stop
reason and usage. Where the SDK accumulates a block the gateway does not handle (extended
thinking), the gateway must raise rather than drop it.
"""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import Message

from planner.agent.calls import CallRecord, GatewayError
from planner.agent.gateway import AnthropicGateway
from planner.agent.messages import ChatMessage, ModelRequest, ModelResponse, TextBlock
from tests.fakes.messages_api import (
    FakeMessagesAPI,
    MessageReply,
    RedactedThinkingBlockSpec,
    StreamReply,
    TextBlockSpec,
    TextReply,
    ThinkingBlockSpec,
    ToolCallSpec,
    ToolUseReply,
    Usage,
)

MODEL = "claude-parity"
KEY = "sk-parity"
REQUEST = ModelRequest(
    model=MODEL,
    system="You are terse.",
    messages=(ChatMessage(role="user", content=(TextBlock("Hi"),), kind="human"),),
    max_tokens=64,
)

CASES: dict[str, MessageReply] = {
    "text in many deltas": TextReply(
        "Hello from the fake Messages API.",
        chunks=7,
        usage=Usage(input_tokens=321, output_tokens=17, cache_read_input_tokens=40),
    ),
    "tool_use input split mid-token": ToolUseReply(
        [
            ToolCallSpec(
                "get_item",
                id="toolu_split",
                json_chunks=['{"ke', 'y": "BAL-', '1", "note": "caf\\u00', 'e9 \\u2615", "n": [1, ', "2]}"],
            )
        ],
        text_before="Let me look.",
        text_chunks=3,
    ),
    "several blocks": StreamReply(
        [
            TextBlockSpec("First the items, ", chunks=2),
            ToolCallSpec("list_items", {"kind": "ticket", "limit": 5}, id="toolu_1", json_chunks=4),
            ToolCallSpec("list_runnable", {}, id="toolu_2", json_chunks=[]),
            TextBlockSpec("then the rest.", chunks=3),
        ],
        stop_reason="tool_use",
        usage=Usage(input_tokens=1000, output_tokens=50, cache_creation_input_tokens=800),
    ),
    "max_tokens": TextReply("An answer that runs into the limi", chunks=4, stop_reason="max_tokens"),
    "refusal": TextReply("I can't help with that.", stop_reason="refusal"),
    "stop_sequence": TextReply("Up to the marker", chunks=2, stop_reason="stop_sequence", stop_sequence="##"),
}


class TextSink:
    def __init__(self) -> None:
        self.deltas: list[str] = []
        self.resets = 0

    async def on_text(self, delta: str) -> None:
        self.deltas.append(delta)

    async def on_reset(self) -> None:
        self.resets += 1


async def through_gateway(
    fake: FakeMessagesAPI, gateway: AnthropicGateway, reply: MessageReply, sink: TextSink
) -> tuple[ModelResponse, list[CallRecord]]:
    records: list[CallRecord] = []

    async def meter(record: CallRecord) -> None:
        records.append(record)

    fake.enqueue(reply)
    try:
        return await gateway.complete(REQUEST, api_key=KEY, sink=sink, meter=meter), records
    finally:
        assert len(records) == 1  # metered once, also when it raises


async def through_sdk(fake: FakeMessagesAPI, gateway: AnthropicGateway, reply: MessageReply) -> Message:
    fake.enqueue(reply)
    client = gateway.client(KEY)
    async with client.messages.stream(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Hi"}]
    ) as stream:
        return await stream.get_final_message()


def sdk_blocks(message: Message) -> list[dict[str, Any]]:
    """The SDK's blocks in the wire form the gateway's blocks give (``to_wire``)."""
    out: list[dict[str, Any]] = []
    for block in message.content:
        if block.type == "text":
            out.append({"type": "text", "text": block.text})
        elif block.type == "tool_use":
            out.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
        else:
            out.append({"type": block.type})
    return out


def sdk_usage(message: Message) -> tuple[int, int, int, int]:
    usage = message.usage
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_creation_input_tokens or 0,
        usage.cache_read_input_tokens or 0,
    )


@pytest.mark.parametrize("case", list(CASES))
async def test_the_gateway_accumulates_the_stream_as_the_sdk_does(served, case):
    fake, gateway = served
    reply = CASES[case]
    sink = TextSink()
    ours, records = await through_gateway(fake, gateway, reply, sink)
    theirs = await through_sdk(fake, gateway, reply)

    assert [block.to_wire() for block in ours.content] == sdk_blocks(theirs)
    assert ours.stop_reason == theirs.stop_reason
    usage = ours.usage
    reported = (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_creation_input_tokens,
        usage.cache_read_input_tokens,
    )
    assert reported == sdk_usage(theirs)
    assert records[0].usage == usage
    assert records[0].outcome == "ok"
    # What watchers saw stream is the text the answer holds.
    assert "".join(sink.deltas) == "".join(b["text"] for b in sdk_blocks(theirs) if b["type"] == "text")
    assert fake.requests[0].json["stream"] is True


@pytest.mark.parametrize(
    ("blocks", "kind"),
    [
        ([ThinkingBlockSpec("Weigh the options first.", chunks=3), "Option B."], "thinking"),
        ([RedactedThinkingBlockSpec("opaque"), "Option B."], "redacted_thinking"),
        (["Option B, ", ThinkingBlockSpec("On reflection...", chunks=2), "or C."], "thinking"),
    ],
)
async def test_a_block_the_gateway_does_not_handle_raises_where_the_sdk_keeps_it(served, blocks, kind):
    fake, gateway = served
    reply = StreamReply(blocks, usage=Usage(input_tokens=200, output_tokens=30))
    theirs = await through_sdk(fake, gateway, reply)
    assert kind in [block.type for block in theirs.content]  # the SDK keeps it: it is not noise

    records: list[CallRecord] = []

    async def meter(record: CallRecord) -> None:
        records.append(record)

    fake.enqueue(reply)
    with pytest.raises(GatewayError) as raised:
        await gateway.complete(REQUEST, api_key=KEY, sink=TextSink(), meter=meter)
    assert raised.value.kind == "unsupported_content"
    assert raised.value.message == (
        f"The model answered with content Ballet cannot handle yet (a {kind} block); the answer was not used."
    )
    [record] = records
    assert (record.outcome, record.usage.input_tokens) == ("error", 200)  # paid for: metered
    assert record.error == raised.value.message


async def test_a_stop_reason_the_gateway_does_not_know_raises(served):
    fake, gateway = served
    reply = TextReply("Half", stop_reason="a_reason_from_the_future")
    theirs = await through_sdk(fake, gateway, reply)
    assert theirs.stop_reason == "a_reason_from_the_future"  # the SDK passes it on as it came

    with pytest.raises(GatewayError) as raised:
        await through_gateway(fake, gateway, reply, TextSink())
    assert raised.value.kind == "unknown_stop_reason"
    assert "a_reason_from_the_future" in raised.value.message
