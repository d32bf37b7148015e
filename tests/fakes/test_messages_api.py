"""The Messages API fake, driven through the real ``anthropic`` SDK (``AsyncAnthropic``)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from anthropic import (
    APIConnectionError,
    APIStatusError,
    AsyncAnthropic,
    AuthenticationError,
    BadRequestError,
    InternalServerError,
    OverloadedError,
    RateLimitError,
)
from anthropic.types import MessageParam, ToolParam

from tests.fakes.messages_api import (
    BreakOffReply,
    ErrorReply,
    FakeMessagesAPI,
    HangReply,
    RedactedThinkingBlockSpec,
    Reply,
    StreamReply,
    TextBlockSpec,
    TextReply,
    ThinkingBlockSpec,
    ToolCallSpec,
    ToolUseReply,
    Usage,
    history_problems,
)

MODEL = "claude-fake-test-model"
HELLO: list[MessageParam] = [{"role": "user", "content": "Hello"}]


@pytest.fixture
def fake() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as api:
        yield api


@asynccontextmanager
async def sdk(fake: FakeMessagesAPI, max_retries: int = 2) -> AsyncIterator[AsyncAnthropic]:
    async with AsyncAnthropic(api_key="test", base_url=fake.base_url, max_retries=max_retries) as client:
        yield client


async def raw_events(client: AsyncAnthropic, **kwargs: Any) -> list[Any]:
    stream = await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO, stream=True, **kwargs)
    return [event async for event in stream]


def text_deltas(events: list[Any]) -> list[str]:
    return [e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta"]


async def wait_finished(fake: FakeMessagesAPI, index: int) -> None:
    assert await asyncio.to_thread(fake.requests[index].finished.wait, 2.0)


# -- streaming ----------------------------------------------------------------------------------------


async def test_streamed_text_arrives_in_order_as_raw_events(fake):
    chunks = ["The ", "quick ", "brown ", "fox ", "jumps."]
    fake.enqueue(TextReply(chunks=chunks))
    async with sdk(fake) as client:
        events = await raw_events(client)

    assert [e.type for e in events] == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * 5,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]  # the ping is consumed by the SDK
    assert text_deltas(events) == chunks
    assert events[0].message.id == "msg_fake_1"
    assert events[0].message.model == MODEL
    assert events[-2].delta.stop_reason == "end_turn"
    assert fake.requests[0].outcome == "completed"


async def test_stream_helper_accumulates_text_split_by_count(fake):
    text = "Pack my box with five dozen liquor jugs."
    fake.enqueue(TextReply(text, chunks=7, stop_reason="max_tokens"))
    async with (
        sdk(fake) as client,
        client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream,
    ):
        pieces = [piece async for piece in stream.text_stream]
        message = await stream.get_final_message()

    assert len(pieces) == 7
    assert "".join(pieces) == text
    assert message.content[0].type == "text"
    assert message.content[0].text == text
    assert message.stop_reason == "max_tokens"


async def test_tool_use_input_json_is_split_over_deltas_and_parses(fake):
    weather = ToolCallSpec(
        "get_weather", {"city": "Paris", "days": [1, 2, 3]}, id="toolu_given", json_chunks=5
    )
    search = ToolCallSpec("search", {"query": "café ☕", "limit": 3}, json_chunks=3)
    fake.enqueue(ToolUseReply([weather, search], text_before="Let me check."), ToolUseReply([weather]))
    async with sdk(fake) as client:
        events = await raw_events(client)
        async with client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream:
            message = await stream.get_final_message()

    json_deltas = [
        (e.index, e.delta.partial_json)
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
    ]
    assert [index for index, _ in json_deltas] == [1] * 5 + [2] * 3
    starts = [e.content_block for e in events if e.type == "content_block_start"]
    assert [block.type for block in starts] == ["text", "tool_use", "tool_use"]
    assert starts[1].id == "toolu_given"
    assert starts[2].id == "toolu_fake_1"
    assert text_deltas(events) == ["Let me check."]
    assert events[-2].delta.stop_reason == "tool_use"

    assert message.stop_reason == "tool_use"
    [block] = message.content
    assert block.type == "tool_use"
    assert (block.id, block.name, block.input) == ("toolu_given", "get_weather", weather.input)


async def test_stream_reply_mixes_text_and_tool_blocks(fake):
    reply = StreamReply(
        [
            "First, ",
            ToolCallSpec("a", {"x": 1}, json_chunks=2),
            TextBlockSpec("then more text", chunks=3),
            ToolCallSpec("b", {}),
        ],
        stop_reason="tool_use",
        stop_sequence=None,
    )
    fake.enqueue(reply)
    async with (
        sdk(fake) as client,
        client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream,
    ):
        message = await stream.get_final_message()

    assert [block.type for block in message.content] == ["text", "tool_use", "text", "tool_use"]
    assert message.content[2].type == "text"
    assert message.content[2].text == "then more text"
    assert message.content[1].type == "tool_use"
    assert message.content[1].input == {"x": 1}
    assert message.content[3].type == "tool_use"
    assert message.content[3].input == {}


async def test_thinking_blocks_stream_as_the_api_streams_them(fake):
    reply = StreamReply(
        [
            ThinkingBlockSpec("Weigh the options first.", chunks=3, signature="sig_1"),
            RedactedThinkingBlockSpec("opaque"),
            "Option B.",
        ]
    )
    fake.enqueue(reply, reply)
    async with sdk(fake) as client:
        events = await raw_events(client)
        async with client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream:
            message = await stream.get_final_message()

    deltas = [e.delta.type for e in events if e.type == "content_block_delta"]
    assert deltas == ["thinking_delta"] * 3 + ["signature_delta", "text_delta"]
    assert [block.type for block in message.content] == ["thinking", "redacted_thinking", "text"]
    thinking, redacted = message.content[0], message.content[1]
    assert thinking.type == "thinking"
    assert (thinking.thinking, thinking.signature) == ("Weigh the options first.", "sig_1")
    assert redacted.type == "redacted_thinking"
    assert redacted.data == "opaque"


async def test_usage_is_reported_in_message_start_and_message_delta(fake):
    usage = Usage(
        input_tokens=1200, output_tokens=37, cache_creation_input_tokens=800, cache_read_input_tokens=400
    )
    fake.enqueue(TextReply("Hi!", usage=usage), TextReply("Hi!", usage=usage))
    async with sdk(fake) as client:
        events = await raw_events(client)
        async with client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream:
            final = await stream.get_final_message()

    start = events[0].message.usage
    assert (start.input_tokens, start.cache_creation_input_tokens, start.cache_read_input_tokens) == (
        1200,
        800,
        400,
    )
    assert start.output_tokens == 1
    delta = events[-2]
    assert delta.type == "message_delta"
    assert delta.usage.output_tokens == 37
    assert final.usage.input_tokens == 1200
    assert final.usage.cache_read_input_tokens == 400
    assert final.usage.output_tokens == 37


async def test_delay_between_deltas_paces_the_stream(fake):
    fake.enqueue(TextReply("abcd", chunks=4, delay_between_deltas=0.04))  # three pauses
    async with sdk(fake) as client:
        started = time.perf_counter()
        events = await raw_events(client)
        elapsed = time.perf_counter() - started

    assert text_deltas(events) == ["a", "b", "c", "d"]
    assert 0.1 <= elapsed < 1.0


async def test_close_delimited_sse_framing_is_accepted_by_the_sdk():
    with FakeMessagesAPI([TextReply("one two", chunks=2), TextReply("three")], sse_framing="close") as fake:
        async with sdk(fake) as client:
            first = await raw_events(client)
            second = await raw_events(client)

    assert text_deltas(first) == ["one", " two"]
    assert text_deltas(second) == ["three"]


async def test_many_concurrent_streams_are_fast():
    reply = TextReply("x" * 400, chunks=100)
    with FakeMessagesAPI(responder=lambda _body: reply) as fake:
        async with sdk(fake) as client:
            started = time.perf_counter()
            results = await asyncio.gather(*(raw_events(client) for _ in range(40)))
            elapsed = time.perf_counter() - started

    assert all("".join(text_deltas(events)) == reply.text for events in results)
    assert len(fake.requests) == 40
    assert len({events[0].message.id for events in results}) == 40
    assert elapsed < 2.0


# -- non-streaming ------------------------------------------------------------------------------------


async def test_non_streaming_create_returns_the_message(fake):
    fake.enqueue(
        TextReply("Bonjour", usage=Usage(input_tokens=5, output_tokens=2)),
        ToolUseReply([ToolCallSpec("lookup", {"q": "x"})], text_before="Looking up."),
        StreamReply([ThinkingBlockSpec("Hm.", signature="sig_2"), "Yes."], stop_reason="refusal"),
    )
    async with sdk(fake) as client:
        text = await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
        tool = await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
        thought = await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO)

    assert text.id == "msg_fake_1"
    assert text.model == MODEL
    assert text.content[0].type == "text"
    assert text.content[0].text == "Bonjour"
    assert text.stop_reason == "end_turn"
    assert (text.usage.input_tokens, text.usage.output_tokens) == (5, 2)
    assert [block.type for block in tool.content] == ["text", "tool_use"]
    assert tool.content[1].type == "tool_use"
    assert (tool.content[1].id, tool.content[1].input) == ("toolu_fake_1", {"q": "x"})
    assert tool.stop_reason == "tool_use"
    assert thought.content[0].type == "thinking"
    assert (thought.content[0].thinking, thought.content[0].signature) == ("Hm.", "sig_2")
    assert thought.stop_reason == "refusal"
    assert [r.stream for r in fake.requests] == [False, False, False]


# -- recording and scripting --------------------------------------------------------------------------


async def test_requests_are_recorded_with_their_json_bodies(fake):
    tools: list[ToolParam] = [
        {"name": "lookup", "description": "Look up", "input_schema": {"type": "object", "properties": {}}}
    ]
    fake.enqueue(TextReply("ok"), TextReply("ok"))
    async with sdk(fake) as client:
        await raw_events(client, system="You are terse.", tools=tools)
        await client.messages.create(model="claude-fake-other-model", max_tokens=7, messages=HELLO)

    first, second = fake.requests
    assert (first.method, first.path) == ("POST", "/v1/messages")
    assert first.json == {
        "model": MODEL,
        "max_tokens": 64,
        "messages": HELLO,
        "system": "You are terse.",
        "tools": tools,
        "stream": True,
    }
    assert first.stream is True
    assert first.headers["authorization"] == "Bearer test"
    assert "anthropic-version" in first.headers
    assert first.headers["content-type"] == "application/json"
    assert second.json["model"] == "claude-fake-other-model"
    assert second.json["max_tokens"] == 7
    assert "stream" not in second.json
    assert fake.pending == 0


async def test_responder_answers_when_the_queue_is_empty(fake):
    def echo(body: dict[str, Any]) -> Reply:
        return TextReply(f"echo: {body['messages'][-1]['content']}")

    fake.enqueue(TextReply("scripted first"))
    fake.responder = echo
    async with sdk(fake) as client:
        first = await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
        second = await client.messages.create(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "ping"}]
        )

    assert first.content[0].type == "text"
    assert first.content[0].text == "scripted first"
    assert second.content[0].type == "text"
    assert second.content[0].text == "echo: ping"


async def test_exhausted_script_answers_500_naming_the_request(fake):
    fake.enqueue(TextReply("only one"))
    async with sdk(fake, max_retries=2) as client:
        await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
        with pytest.raises(InternalServerError) as excinfo:
            await client.messages.create(
                model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "one more please"}]
            )

    error = excinfo.value
    assert error.status_code == 500
    assert error.api_message is not None
    assert "no reply scripted for request #1" in error.api_message
    assert "one more please" in error.api_message
    assert len(fake.requests) == 2  # x-should-retry: false stopped the SDK's retries
    assert fake.requests[1].outcome == "unscripted"


async def test_a_responder_that_raises_fails_loudly(fake):
    def broken(_body: dict[str, Any]) -> Reply:
        raise KeyError("oops")

    fake.responder = broken
    async with sdk(fake) as client:
        with pytest.raises(InternalServerError, match="responder raised"):
            await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO)

    assert len(fake.responder_errors) == 1
    assert fake.requests[0].outcome == "responder_error"


async def test_unknown_paths_get_404_without_using_the_script(fake):
    fake.enqueue(TextReply("kept"))
    async with sdk(fake) as client:
        with pytest.raises(APIStatusError) as excinfo:
            await client.models.list()

    assert excinfo.value.status_code == 404
    assert fake.requests[0].outcome == "not_found"
    assert fake.pending == 1


def test_reply_specs_validate_at_construction(fake):
    with pytest.raises(ValueError, match="join to"):
        TextReply("abc", chunks=["a", "b"])
    with pytest.raises(ValueError, match="cannot split"):
        TextReply("ab", chunks=3)
    with pytest.raises(TypeError):
        TextReply("ab", chunks="ab")
    with pytest.raises(ValueError, match="only 2 deltas"):
        BreakOffReply(3, reply=TextReply("ab", chunks=2))
    assert TextReply(chunks=["x", "y"]).text == "xy"
    with pytest.raises(TypeError, match="not a reply"):
        fake.enqueue("hello")


# -- errors -------------------------------------------------------------------------------------------


async def test_overloaded_then_success_is_retried_quickly_by_the_sdk(fake):
    fake.enqueue(ErrorReply(529), ErrorReply(500), TextReply("third time lucky", chunks=3))
    async with sdk(fake, max_retries=2) as client:
        started = time.perf_counter()
        events = await raw_events(client)
        elapsed = time.perf_counter() - started

    assert "".join(text_deltas(events)) == "third time lucky"
    assert elapsed < 1.0
    assert [r.outcome for r in fake.requests] == ["error_reply", "error_reply", "completed"]
    assert [r.headers["x-stainless-retry-count"] for r in fake.requests] == ["0", "1", "2"]


async def test_retries_run_out_and_raise_the_typed_error(fake):
    fake.enqueue(ErrorReply(529, message="Busy busy"), ErrorReply(529, message="Busy busy"))
    async with sdk(fake, max_retries=1) as client:
        with pytest.raises(OverloadedError) as excinfo:
            await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO)

    assert excinfo.value.type == "overloaded_error"
    assert excinfo.value.api_message == "Busy busy"
    assert excinfo.value.request_id == "req_fake_1"


async def test_401_raises_authentication_error_without_retry(fake):
    fake.enqueue(ErrorReply(401), TextReply("never sent"))
    async with sdk(fake, max_retries=2) as client:
        with pytest.raises(AuthenticationError) as excinfo:
            await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO, stream=True)

    assert excinfo.value.status_code == 401
    assert excinfo.value.type == "authentication_error"
    assert len(fake.requests) == 1
    assert fake.pending == 1


@pytest.mark.parametrize(
    ("reply", "error_class"),
    [
        (ErrorReply(429), RateLimitError),
        (ErrorReply(400, message="max_tokens: too large"), BadRequestError),
        (ErrorReply(503, should_retry=False), InternalServerError),
    ],
)
async def test_error_replies_map_to_sdk_exceptions(fake, reply, error_class):
    fake.enqueue(reply)
    async with sdk(fake, max_retries=0) as client:
        with pytest.raises(error_class) as excinfo:
            await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO)

    assert excinfo.value.status_code == reply.status
    assert excinfo.value.type == reply.resolved_type


async def test_break_off_raises_mid_stream_after_the_first_deltas(fake):
    fake.enqueue(BreakOffReply(after_deltas=2), TextReply("not used"))
    received: list[str] = []

    async def consume(client: AsyncAnthropic) -> None:
        stream = await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO, stream=True)
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                received.append(event.delta.text)

    async with sdk(fake, max_retries=2) as client:
        with pytest.raises(APIStatusError) as excinfo:
            await consume(client)

    assert received == ["part 0 ", "part 1 "]
    assert excinfo.value.type == "overloaded_error"
    assert excinfo.value.status_code == 200  # the HTTP status of the stream that carried the error
    assert len(fake.requests) == 1  # the SDK does not retry a stream that already started
    assert fake.requests[0].outcome == "broke_off"


async def test_break_off_in_a_tool_stream_through_the_helper(fake):
    reply = ToolUseReply([ToolCallSpec("t", {"k": "value"}, json_chunks=4)])
    fake.enqueue(BreakOffReply(3, error_type="api_error", message="Internal server error", reply=reply))
    async with (
        sdk(fake) as client,
        client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream,
    ):
        with pytest.raises(APIStatusError, match="api_error"):
            await stream.get_final_message()


async def test_break_off_on_a_non_streaming_request_is_an_http_error(fake):
    fake.enqueue(BreakOffReply(1))
    async with sdk(fake, max_retries=0) as client:
        with pytest.raises(OverloadedError):
            await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO)


# -- hanging, cancelling and closing ------------------------------------------------------------------


async def test_hanging_stream_can_be_cancelled_and_the_fake_keeps_working(fake):
    fake.enqueue(HangReply(after_deltas=1, reply=TextReply("first then never", chunks=2)), TextReply("after"))
    first_delta = asyncio.Event()

    async with sdk(fake) as client:

        async def consume() -> None:
            stream = await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO, stream=True)
            async for event in stream:
                if event.type == "content_block_delta":
                    first_delta.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(first_delta.wait(), 2.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await wait_finished(fake, 0)

        events = await raw_events(client)

    assert fake.requests[0].outcome == "client_disconnected"
    assert text_deltas(events) == ["after"]
    assert fake.requests[1].outcome == "completed"


async def test_hang_with_delay_then_completes(fake):
    fake.enqueue(HangReply(0.05, after_deltas=1, reply=TextReply("slow reply", chunks=2)))
    async with sdk(fake) as client:
        started = time.perf_counter()
        events = await raw_events(client)

    assert text_deltas(events) == ["slow ", "reply"]
    assert time.perf_counter() - started >= 0.05


async def test_hang_until_released_then_completes(fake):
    release = threading.Event()
    fake.enqueue(HangReply(after_deltas=1, release=release, reply=TextReply("held back", chunks=2)))
    async with sdk(fake) as client:
        stream = await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO, stream=True)
        events = stream.__aiter__()
        while (await events.__anext__()).type != "content_block_delta":
            pass
        rest = asyncio.create_task(asyncio.wait_for(_drain(events), 5))
        await asyncio.sleep(0.2)
        assert not rest.done()  # held until released
        release.set()
        rest_events = await rest

    assert text_deltas(rest_events) == [" back"]
    assert fake.requests[0].outcome == "completed"


async def _drain(events: Any) -> list[Any]:
    return [event async for event in events]


def test_history_problems_names_what_the_api_refuses():
    use = {"type": "tool_use", "id": "toolu_1", "name": "get_item", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "{}"}
    valid = [
        {"role": "user", "content": "Plan"},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking"}, use]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": [{"type": "text", "text": "Done"}]},
    ]
    assert history_problems(valid) == []
    assert history_problems([]) == ["a request needs messages"]
    assert history_problems([valid[1]]) == [
        "the first message must be the user's",
        "the request ends in a tool_use without its tool_result",
    ]
    assert history_problems([valid[0], valid[0]]) == ["message 1: roles must alternate"]
    assert history_problems([*valid[:2], {"role": "user", "content": "And?"}]) == [
        "message 2: tool_use ['toolu_1'] has no tool_result"
    ]
    assert history_problems([valid[0], {"role": "assistant", "content": []}, valid[2]]) == [
        "message 1 is empty",
        "message 2: tool_result ['toolu_1'] answers no tool_use",
    ]
    assert history_problems([{"role": "user", "content": [{"type": "text", "text": " "}]}]) == [
        "message 0 has an empty text block"
    ]


async def test_hang_before_headers_hits_the_client_timeout(fake):
    fake.enqueue(HangReply(before_headers=True))
    async with sdk(fake, max_retries=0) as client:
        with pytest.raises(APIConnectionError):  # APITimeoutError is a subclass
            await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO, timeout=0.2)
    await wait_finished(fake, 0)
    assert fake.requests[0].outcome == "client_disconnected"


async def test_close_ends_a_hanging_stream_and_is_idempotent():
    fake = FakeMessagesAPI([HangReply()])
    async with sdk(fake, max_retries=0) as client:
        stream = await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO, stream=True)
        iterator = stream.__aiter__()
        assert (await iterator.__anext__()).type == "message_start"

        started = time.perf_counter()
        await asyncio.to_thread(fake.close)
        assert time.perf_counter() - started < 1.0
        with pytest.raises(Exception):  # noqa: B017, PT011 - the transport's own "peer closed" error
            async for _ in iterator:
                pass

    fake.close()
    assert fake.closed
    assert fake.requests[0].outcome == "server_closed"
    assert not fake._thread.is_alive()


async def test_a_fake_that_keeps_no_requests_still_numbers_them():
    with FakeMessagesAPI(keep_requests=False) as fake:
        fake.enqueue(TextReply("one"), ErrorReply(529, message="Busy"), ErrorReply(529, message="Busy"))
        async with sdk(fake, max_retries=1) as client:
            events = await raw_events(client)
            with pytest.raises(OverloadedError) as excinfo:
                await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO)

        assert "".join(text_deltas(events)) == "one"
        assert excinfo.value.request_id == "req_fake_2"  # the third request received
        assert fake.requests == []
        fake.reset()
        fake.enqueue(ErrorReply(400, message="Bad"))
        async with sdk(fake) as client:
            with pytest.raises(BadRequestError) as bad:
                await client.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
        assert bad.value.request_id == "req_fake_0"
