"""The LLM gateway: with ``wire.py`` (its requests) the only importer of ``anthropic``, and the
meter of every model call.

Every call (turns, compaction, titles) streams through :class:`AnthropicGateway`
with the project's credential and model. The SDK's retry policy covers 429/529/5xx
answers before a stream starts (``wire.py``); a stream that breaks off with an overloaded or
server error, or whose connection drops, is retried here (the sink is told to drop the
partial text). Each attempt is metered once: a :class:`CallRecord` to the caller's meter and
the Prometheus counters.

Streaming is the hot path of a busy server (one event per few tokens, for every running
turn), so the request goes out as the SDK's client would send it but straight through aiohttp
(``wire.py``), and the gateway reads the stream's server-sent events from aiohttp's bytes
(``sse.py``) and decodes each one's JSON itself, skipping the SDK's typed event models (a third
of the CPU per delta), its line-by-line decoder (a tenth) and httpx's layers over the body.
What it reads must agree with the SDK's own accumulator
(``tests/planner/agent/test_gateway_parity.py``), and a content block or delta it
does not handle (extended thinking, server tools) fails the call with a
readable error instead of vanishing from the answer; so does a stop reason it
does not know, or a stream that ends without one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, get_args

import aiohttp
import anthropic
from prometheus_client import Counter, Histogram

from planner.agent.calls import CallRecord, GatewayError, Meter, StreamSink
from planner.agent.messages import (
    Block,
    ModelRequest,
    ModelResponse,
    StopReason,
    TextBlock,
    ToolUseBlock,
    Usage,
)
from planner.agent.request_body import request_body
from planner.agent.sse import EventReader
from planner.agent.wire import Wire

logger = logging.getLogger(__name__)

LLM_TOKENS = Counter("ballet_llm_tokens_total", "Tokens metered by the LLM gateway.", ["kind"])
LLM_SECONDS = Histogram(
    "ballet_llm_request_seconds",
    "Latency of model calls through the LLM gateway.",
    ["purpose", "outcome"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160),
)
LLM_CALLS = Counter("ballet_llm_requests_total", "Model calls through the gateway.", ["purpose", "outcome"])

STREAM_RETRIES = 2
STOP_REASONS: dict[str, StopReason] = {reason: reason for reason in get_args(StopReason)}
RETRYABLE_STREAM_ERRORS = ("overloaded_error", "api_error")


@dataclass
class _Answer:
    blocks: list[Block] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    tool: dict[str, Any] | None = None
    json_parts: list[str] = field(default_factory=list)
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation: int = 0
    cache_read: int = 0

    @property
    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens, self.cache_creation, self.cache_read)


def request_params(request: ModelRequest) -> dict[str, Any]:
    """The request's parameters as ``messages.create`` takes them (what :func:`request_body`
    encodes, less ``stream``), with cache breakpoints on the system prompt, tools and history."""
    params: dict[str, Any] = json.loads(request_body(request))
    del params["stream"]
    return params


_STATUS_ERRORS: tuple[tuple[type[Exception], str, str], ...] = (
    (
        anthropic.AuthenticationError,
        "authentication",
        "The Anthropic API refused the credential (401): check the project's API key.",
    ),
    (
        anthropic.PermissionDeniedError,
        "permission",
        "The Anthropic API refused this request (403) for this credential.",
    ),
    (
        anthropic.RateLimitError,
        "rate_limited",
        "The model is rate-limited (429) and retries did not help; try again.",
    ),
    (anthropic.APITimeoutError, "timeout", "The model did not answer in time."),
    (anthropic.APIConnectionError, "connection", "Could not reach the Anthropic API."),
)
_TOO_LONG = ("prompt is too long", "context window", "too many tokens")


def _readable(exc: Exception) -> GatewayError:
    for kind, code, message in _STATUS_ERRORS:
        if isinstance(exc, kind):
            return GatewayError(code, message)
    if isinstance(exc, anthropic.BadRequestError):
        if any(marker in str(exc) for marker in _TOO_LONG):
            return GatewayError(
                "context_too_long", "The conversation is too long for the model's context window."
            )
        return GatewayError("bad_request", f"The model rejected the request: {_error_message(exc)}")
    if isinstance(exc, anthropic.APIStatusError):
        return GatewayError("server", f"The Anthropic API failed: {_error_message(exc)}")
    return GatewayError("error", f"The model call failed: {exc}")


def _error_message(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return f"{error.get('type', 'error')}: {error['message']}"
    return str(exc)


def _stream_error_type(exc: anthropic.APIStatusError) -> str | None:
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        kind = body["error"].get("type")
        return str(kind) if kind else None
    return None


class AnthropicGateway:
    """The gateway on ``AsyncAnthropic``; one client per credential and event loop, reused
    across calls (an aiohttp session belongs to the loop that opened it)."""

    def __init__(self, *, base_url: str | None = None, max_retries: int = 3, timeout: float = 300.0) -> None:
        self.base_url = base_url
        self.max_retries = max_retries
        self.timeout = timeout
        self._wires: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Wire]] = (
            weakref.WeakKeyDictionary()
        )

    def client(self, api_key: str) -> anthropic.AsyncAnthropic:
        return self._wire(api_key).client

    def _wire(self, api_key: str) -> Wire:
        wires = self._wires.setdefault(asyncio.get_running_loop(), {})
        wire = wires.get(api_key)
        if wire is None:
            client = anthropic.AsyncAnthropic(
                api_key=api_key,
                base_url=self.base_url,
                max_retries=self.max_retries,
                timeout=self.timeout,
                http_client=anthropic.DefaultAioHttpClient(),
            )
            wire = wires[api_key] = Wire(client)
        return wire

    async def close(self) -> None:
        """Close this loop's clients (their connection pools)."""
        for wire in self._wires.pop(asyncio.get_running_loop(), {}).values():
            await wire.close()

    async def complete(
        self, request: ModelRequest, *, api_key: str | None, sink: StreamSink | None, meter: Meter
    ) -> ModelResponse:
        if not api_key:
            raise GatewayError(
                "no_credential",
                "This project has no Anthropic API key. An owner can set one on the project's "
                "settings page (/projects/KEY/settings/), or the server can set ANTHROPIC_API_KEY.",
            )
        body = request_body(request)
        for attempt in range(STREAM_RETRIES + 1):
            try:
                return await self._attempt(request, body, api_key, sink, meter)
            except anthropic.APIStatusError as exc:
                retryable = exc.status_code == 200 and _stream_error_type(exc) in RETRYABLE_STREAM_ERRORS
                if not retryable or attempt == STREAM_RETRIES:
                    raise _readable(exc) from exc
                await _before_retry(sink, attempt, f"broke off ({_stream_error_type(exc)})")
            except anthropic.AnthropicError as exc:
                raise _readable(exc) from exc
            except _DroppedError as exc:
                if attempt == STREAM_RETRIES:
                    raise GatewayError("connection", DROPPED) from exc
                await _before_retry(sink, attempt, f"dropped ({exc})")
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(
        self,
        request: ModelRequest,
        body: bytes,
        api_key: str,
        sink: StreamSink | None,
        meter: Meter,
    ) -> ModelResponse:
        answer = _Answer()
        started = time.perf_counter()
        outcome, error = "error", ""
        try:
            # The body as the SDK's messages.create would send it, encoded from kept parts
            # (planner/agent/request_body.py), sent as the SDK's client would send it (wire.py).
            wire = self._wire(api_key)
            async with await wire.post(body) as response:
                await _read(wire, response, answer, sink)
            stop_reason = _stop_reason(answer)
            outcome = "ok"
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except anthropic.AnthropicError as exc:
            error = str(exc)[:500]
            raise
        except GatewayError as exc:
            error = exc.message[:500]
            raise
        except _DroppedError as exc:
            error = f"the stream broke off: {exc}"[:500]
            raise
        finally:
            record = CallRecord(
                purpose=request.purpose,
                model=request.model,
                usage=answer.usage,
                latency_ms=(time.perf_counter() - started) * 1000,
                outcome=outcome,
                error=error,
            )
            _observe(record)
            await asyncio.shield(meter(record))
        return ModelResponse(
            content=tuple(answer.blocks),
            stop_reason=stop_reason,
            usage=answer.usage,
            model=request.model,
        )


async def _before_retry(sink: StreamSink | None, attempt: int, what: str) -> None:
    """A stream that ``what`` (broke off, dropped) is asked again: its watchers drop the partial
    text, and the next attempt waits a little longer than the last."""
    logger.warning("model stream %s; retrying", what)
    if sink is not None:
        await sink.on_reset()
    await asyncio.sleep(0.2 * (attempt + 1))


async def _read(
    wire: Wire, response: aiohttp.ClientResponse, answer: _Answer, sink: StreamSink | None
) -> None:
    """The answer's events into ``answer`` as they arrive, its text deltas to ``sink``."""
    reader = EventReader()
    read = response.content.readany
    silence = wire.silence(response)
    try:
        while chunk := await read():
            silence.heard()
            for kind, data in reader.feed(chunk):
                if kind == "content_block_delta":
                    await _delta(answer, json.loads(data)["delta"], sink)
                elif kind == "error":
                    raise _stream_error(wire, response, data)
                elif kind is not None and kind != "ping":
                    _consume(answer, kind, json.loads(data))
    except TimeoutError as exc:  # the read timeout (wire.Silence): silent that long, it is not coming back
        raise GatewayError("timeout", STALLED) from exc
    except aiohttp.ClientError as exc:  # reset, cut short: worth asking again
        raise _DroppedError(str(exc) or type(exc).__name__) from exc
    finally:
        silence.close()


DROPPED = (
    f"The connection to the Anthropic API broke off during the answer, {STREAM_RETRIES + 1} times; try again."
)
STALLED = "The model stopped sending its answer and did not go on in time; try again."


class _DroppedError(Exception):
    """The connection broke off mid-answer: reset, or the body cut short."""


def _stream_error(wire: Wire, response: aiohttp.ClientResponse, data: str) -> anthropic.APIStatusError:
    """An ``error`` event in a stream, raised as the SDK raises it (status 200, the error body)."""
    body: Any = data
    try:
        body = json.loads(data)
        message = f"{body}"
    except ValueError:
        message = data or "The stream ended with an error."
    return wire.status_error(response, message, body)


def _unsupported(what: str) -> GatewayError:
    return GatewayError(
        "unsupported_content",
        f"The model answered with content Ballet cannot handle yet ({what}); the answer was not used.",
    )


def _stop_reason(answer: _Answer) -> StopReason:
    """Why the model stopped, one of the reasons the loop knows; anything else fails the call
    rather than pass for a finished answer."""
    if answer.stop_reason is None:
        raise GatewayError("incomplete", "The model's answer ended before it said why it stopped.")
    reason = STOP_REASONS.get(answer.stop_reason)
    if reason is None:
        raise GatewayError(
            "unknown_stop_reason",
            f"The model stopped for a reason Ballet does not know: {answer.stop_reason}.",
        )
    return reason


def _consume(answer: _Answer, kind: str, event: dict[str, Any]) -> None:
    """An event other than a delta (those are :func:`_delta`'s), as the API's JSON.

    Unknown event types are skipped, as the API asks of clients; an unknown content block
    (``thinking``, ``server_tool_use``, ...) is not: dropping it would change the answer.
    """
    if kind == "content_block_start":
        block = event["content_block"]
        if block["type"] == "tool_use":
            answer.tool = {"id": block["id"], "name": block["name"]}
            answer.json_parts = []
        elif block["type"] == "text":
            answer.text = [block["text"]] if block.get("text") else []
        else:
            raise _unsupported(f"a {block['type']} block")
    elif kind == "content_block_stop":
        _close_block(answer)
    elif kind == "message_start":
        usage = event["message"].get("usage") or {}
        answer.input_tokens = usage.get("input_tokens") or 0
        answer.output_tokens = usage.get("output_tokens") or 0
        answer.cache_creation = usage.get("cache_creation_input_tokens") or 0
        answer.cache_read = usage.get("cache_read_input_tokens") or 0
    elif kind == "message_delta":
        answer.stop_reason = event["delta"].get("stop_reason") or answer.stop_reason
        _delta_usage(answer, event.get("usage") or {})


async def _delta(answer: _Answer, delta: dict[str, Any], sink: StreamSink | None) -> None:
    kind = delta["type"]
    if kind == "text_delta":
        answer.text.append(delta["text"])
        if sink is not None:
            await sink.on_text(delta["text"])
    elif kind == "input_json_delta":
        answer.json_parts.append(delta["partial_json"])
    else:
        raise _unsupported(f"a {kind}")


def _delta_usage(answer: _Answer, usage: dict[str, Any]) -> None:
    answer.output_tokens = usage.get("output_tokens") or answer.output_tokens
    for name, attr in (
        ("input_tokens", "input_tokens"),
        ("cache_creation_input_tokens", "cache_creation"),
        ("cache_read_input_tokens", "cache_read"),
    ):
        value = usage.get(name)
        if value:
            setattr(answer, attr, value)


def _close_block(answer: _Answer) -> None:
    if answer.tool is not None:
        raw = "".join(answer.json_parts)
        try:
            arguments = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            arguments = {"_unparsable_input": raw[:2000]}
        if not isinstance(arguments, dict):
            arguments = {"_unparsable_input": raw[:2000]}
        answer.blocks.append(ToolUseBlock(id=answer.tool["id"], name=answer.tool["name"], input=arguments))
        answer.tool = None
    elif answer.text:
        answer.blocks.append(TextBlock("".join(answer.text)))
        answer.text = []


def _observe(record: CallRecord) -> None:
    LLM_CALLS.labels(record.purpose, record.outcome).inc()
    LLM_SECONDS.labels(record.purpose, record.outcome).observe(record.latency_ms / 1000)
    usage = record.usage
    for kind, value in (
        ("input", usage.input_tokens),
        ("output", usage.output_tokens),
        ("cache_creation", usage.cache_creation_input_tokens),
        ("cache_read", usage.cache_read_input_tokens),
    ):
        if value:
            LLM_TOKENS.labels(kind).inc(value)
