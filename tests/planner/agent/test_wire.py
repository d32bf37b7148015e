"""A model call goes out as the SDK's client sends it, and is retried by the SDK's policy.

``planner/agent/wire.py`` posts through aiohttp what the SDK's client builds once. Each case here
is served by the local fake Messages API; where the SDK's own ``post`` is the yardstick, it is
served the same replies through the same client and both must agree: the headers sent, the
requests made, the error raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anthropic
import httpx2
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from anthropic.types import Message

from planner.agent.calls import CallRecord, GatewayError
from planner.agent.gateway import STALLED, AnthropicGateway
from planner.agent.messages import TextBlock
from planner.agent.request_body import request_body
from tests.fakes.messages_api import ErrorReply, FakeMessagesAPI, Reply, TextReply
from tests.planner.agent.test_gateway_parity import KEY, REQUEST

# Set by whoever sends them: aiohttp and httpx each their own.
TRANSPORT_HEADERS = {"host", "content-length", "connection", "accept-encoding"}


async def through_gateway(gateway: AnthropicGateway) -> list[CallRecord]:
    records: list[CallRecord] = []

    async def meter(record: CallRecord) -> None:
        records.append(record)

    await gateway.complete(REQUEST, api_key=KEY, sink=None, meter=meter)
    return records


async def through_sdk(gateway: AnthropicGateway) -> None:
    """The same body through the SDK's own ``post`` (its request building, httpx, its retries)."""
    stream = await gateway.client(KEY).post(
        "/v1/messages",
        cast_to=Message,
        content=request_body(REQUEST),
        stream=True,
        stream_cls=anthropic.AsyncStream[anthropic.types.RawMessageStreamEvent],
    )
    async with stream:
        async for _ in stream:
            pass


def sent(fake: FakeMessagesAPI) -> list[dict[str, str]]:
    return [
        {
            name.lower(): value
            for name, value in request.headers.items()
            if name.lower() not in TRANSPORT_HEADERS
        }
        for request in fake.requests
    ]


@contextlib.asynccontextmanager
async def gateway_at(base_url: str, **options: Any) -> AsyncIterator[AnthropicGateway]:
    gateway = AnthropicGateway(base_url=base_url, **options)
    try:
        yield gateway
    finally:
        await gateway.close()


@contextlib.asynccontextmanager
async def served_by(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> AsyncIterator[AnthropicGateway]:
    """A gateway to a small aiohttp server of the test's own (what the fake cannot send)."""
    app = web.Application()
    app.router.add_post("/v1/messages", handler)
    async with (
        TestServer(app, host="127.0.0.1") as server,
        gateway_at(str(server.make_url("")).rstrip("/")) as gateway,
    ):
        yield gateway


async def served_both(fake: FakeMessagesAPI, gateway: AnthropicGateway, *replies: Reply) -> tuple[str, str]:
    """``replies`` served to the gateway, then to the SDK: the error each ended with ("" if none)."""
    outcomes = []
    for send in (through_gateway, through_sdk):
        fake.enqueue(*replies)
        try:
            await send(gateway)
            outcomes.append("")
        except GatewayError as exc:
            outcomes.append(type(exc.__cause__).__name__)
        except anthropic.AnthropicError as exc:
            outcomes.append(type(exc).__name__)
    return outcomes[0], outcomes[1]


async def test_the_request_carries_the_sdk_s_headers_and_body(served):
    fake, gateway = served
    await served_both(fake, gateway, TextReply("Hi."))
    ours, sdks = sent(fake)
    assert ours == sdks
    assert ours["x-stainless-retry-count"] == "0"
    assert ours["authorization"] == f"Bearer {KEY}" or ours["x-api-key"] == KEY
    assert fake.requests[0].path == fake.requests[1].path == "/v1/messages"
    assert fake.requests[0].body == fake.requests[1].body


async def test_a_429_is_retried_after_its_retry_after_with_the_attempt_counted(served):
    fake, gateway = served
    assert await served_both(fake, gateway, ErrorReply(429), ErrorReply(529), TextReply("Hi.")) == ("", "")
    counts = [headers["x-stainless-retry-count"] for headers in sent(fake)]
    assert counts == ["0", "1", "2"] * 2


async def test_retries_spent_raise_the_sdk_s_error(served):
    fake, gateway = served
    replies = [ErrorReply(529)] * 3
    assert await served_both(fake, gateway, *replies) == ("OverloadedError", "OverloadedError")
    assert len(fake.requests) == 6  # three attempts each


async def test_a_bad_request_is_not_retried(served):
    fake, gateway = served
    assert await served_both(fake, gateway, ErrorReply(400)) == ("BadRequestError", "BadRequestError")
    assert len(fake.requests) == 2


async def test_the_server_s_x_should_retry_is_obeyed(served):
    fake, gateway = served
    outcome = await served_both(fake, gateway, ErrorReply(503, should_retry=False))
    assert outcome == ("ServiceUnavailableError", "ServiceUnavailableError")
    assert len(fake.requests) == 2
    assert await served_both(fake, gateway, ErrorReply(400, should_retry=True), TextReply("Hi.")) == ("", "")


async def test_the_error_names_what_the_api_said(served):
    fake, gateway = served
    fake.enqueue(ErrorReply(400, message="max_tokens: must be at least 1"))
    with pytest.raises(GatewayError) as raised:
        await through_gateway(gateway)
    assert raised.value.code == "bad_request"
    assert "max_tokens: must be at least 1" in raised.value.message


async def test_an_api_that_cannot_be_reached_is_tried_again_then_reported(monkeypatch):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there once it closes
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr("planner.agent.wire.asyncio.sleep", sleep)
    async with gateway_at(f"http://127.0.0.1:{port}", max_retries=1) as gateway:
        with pytest.raises(GatewayError) as raised:
            await through_gateway(gateway)
    assert raised.value.code == "connection"
    assert isinstance(raised.value.__cause__, anthropic.APIConnectionError)
    assert len(waits) == 1
    assert 0.3 <= waits[0] <= 0.5  # the SDK's first backoff, with its jitter


async def test_the_call_does_not_go_through_httpx(served, monkeypatch):
    """The SDK's client layers are skipped on the hot path (``planner/agent/wire.py``): an SDK
    whose client no longer builds the request this way fails here, not in silence."""
    fake, gateway = served

    async def layered(self, *args, **kwargs):
        raise AssertionError("the call went through httpx's client")

    monkeypatch.setattr(httpx2.AsyncClient, "send", layered)
    fake.enqueue(TextReply("Straight."))
    records = await through_gateway(gateway)
    assert [record.outcome for record in records] == ["ok"]


async def test_closing_the_gateway_closes_its_connections(served):
    fake, gateway = served
    fake.enqueue(TextReply("Hi."))
    await through_gateway(gateway)
    wire = gateway._wire(KEY)
    session = wire._session
    assert not session.closed
    await gateway.close()
    assert session.closed


async def test_the_proxy_the_environment_names_is_used(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example.test:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with gateway_at("https://api.example.test") as gateway:
        wire = gateway._wire(KEY)
        assert str(wire._proxy) == "http://proxy.example.test:3128"


async def test_a_compressed_error_answer_is_read_for_its_message():
    async def refuse(request: web.Request) -> web.Response:
        body = b'{"type": "error", "error": {"type": "invalid_request_error", "message": "too many tools"}}'
        headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
        return web.Response(status=400, body=gzip.compress(body), headers=headers)

    async with served_by(refuse) as gateway:
        with pytest.raises(GatewayError) as raised:
            await through_gateway(gateway)
    assert raised.value.code == "bad_request"
    assert raised.value.message == "The model rejected the request: invalid_request_error: too many tools"


async def test_a_compressed_event_stream_is_read_decoded():
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": []}
    usage = {"input_tokens": 3, "output_tokens": 0}
    text = {"type": "text_delta"}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**message, "stop_reason": None, "usage": usage}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {**text, "text": "Packed "}},
        {"type": "content_block_delta", "index": 0, "delta": {**text, "text": "small."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    ]

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        response.enable_compression(web.ContentCoding.gzip)
        await response.prepare(request)
        for event in events:
            await response.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        await response.write_eof()
        return response

    async with served_by(stream) as gateway:
        answer = await gateway.complete(REQUEST, api_key=KEY, sink=None, meter=_ignore)
    assert answer.content == (TextBlock("Packed small."),)
    assert answer.stop_reason == "end_turn"


async def _ignore(record: CallRecord) -> None:
    pass


def _text_events(*texts: str) -> list[bytes]:
    """A text answer's event stream: its opening, a delta per text, and its close."""
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": []}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**message, "stop_reason": None, "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
            for text in texts
        ),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    ]
    return [f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode() for event in events]


def _paced(events: list[bytes], pause: float, *, hang_after: int | None = None):
    """A handler sending ``events`` ``pause`` seconds apart; the first call stalls for good after
    ``hang_after`` events, if given. The calls it answered are counted in ``calls``."""
    calls: list[int] = []

    async def stream(request: web.Request) -> web.StreamResponse:
        calls.append(1)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for sent, event in enumerate(events):
            if hang_after is not None and sent == hang_after and len(calls) == 1:
                await asyncio.sleep(3600)
            await response.write(event)
            await asyncio.sleep(pause)
        await response.write_eof()
        return response

    return stream, calls


async def test_a_stream_longer_than_the_read_timeout_but_never_silent_that_long_is_read_whole():
    stream, _ = _paced(_text_events("One ", "two ", "three ", "four."), 0.1)
    app = web.Application()
    app.router.add_post("/v1/messages", stream)
    async with (
        TestServer(app, host="127.0.0.1") as server,
        gateway_at(str(server.make_url("")).rstrip("/"), timeout=0.35) as gateway,
    ):
        answer = await gateway.complete(REQUEST, api_key=KEY, sink=None, meter=_ignore)
    assert answer.content == (TextBlock("One two three four."),)  # about 0.9 s in all


async def test_a_stream_silent_for_the_read_timeout_fails_and_the_next_call_is_answered():
    stream, calls = _paced(_text_events("Half ", "an answer."), 0.05, hang_after=3)
    app = web.Application()
    app.router.add_post("/v1/messages", stream)
    async with (
        TestServer(app, host="127.0.0.1") as server,
        gateway_at(str(server.make_url("")).rstrip("/"), timeout=0.3, max_retries=0) as gateway,
    ):
        started = asyncio.get_running_loop().time()
        with pytest.raises(GatewayError) as stalled:  # bounded: a stream never timed out would hang
            await asyncio.wait_for(gateway.complete(REQUEST, api_key=KEY, sink=None, meter=_ignore), 10)
        waited = asyncio.get_running_loop().time() - started
        answer = await gateway.complete(REQUEST, api_key=KEY, sink=None, meter=_ignore)
    assert (stalled.value.kind, str(stalled.value)) == ("timeout", STALLED)
    assert 0.3 <= waited < 5  # the timeout after the last chunk, not the hour the server hangs
    assert len(calls) == 2  # not asked again, and the stalled connection was not reused
    assert answer.content == (TextBlock("Half an answer."),)
