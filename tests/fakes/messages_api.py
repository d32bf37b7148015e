"""A local fake of Anthropic's Messages API (``POST /v1/messages``) for tests and benchmarks.

The fake is a small HTTP/1.1 server on ``127.0.0.1`` with an ephemeral port. It runs its own asyncio
loop in a background thread, so the code under test talks to it through the real ``anthropic`` SDK
(and the SDK's own HTTP client) exactly as it would talk to the API::

    with FakeMessagesAPI() as fake:
        fake.enqueue(
            ErrorReply(529),                                  # the SDK retries this by itself
            TextReply("Hello there", chunks=3),               # ... and gets this, in three text deltas
            ToolUseReply([ToolCallSpec("lookup", {"q": "x"}, json_chunks=4)]),
        )
        client = AsyncAnthropic(api_key="test", base_url=fake.base_url, max_retries=2)
        ...
        assert fake.requests[1].json["model"] == "claude-sonnet-4-5"

As a pytest fixture::

    @pytest.fixture
    def fake_api() -> Iterator[FakeMessagesAPI]:
        with FakeMessagesAPI() as fake:
            yield fake

Scripting. Replies are taken in order from one FIFO shared by all requests (``enqueue()`` or the
constructor's ``replies``). When the FIFO is empty, the optional ``responder(request_json)`` is asked
and may return a reply or ``None``. A request nobody scripted is answered with HTTP 500 naming the
request (and ``x-should-retry: false`` so the SDK raises at once instead of retrying it). Every request
is recorded in ``fake.requests`` (method, path, headers, raw body, parsed JSON, the reply used and how
it ended).

Replies (every message reply answers both ``"stream": true`` requests, as server-sent events, and
non-streaming ones, as one Message JSON):

* ``TextReply(text, chunks=N | [deltas], usage=Usage(...), stop_reason="end_turn",
  delay_between_deltas=0.0, stamp_marker=None)``
* ``ToolUseReply(tool_calls=[ToolCallSpec(name, input, id=None, json_chunks=N)], text_before=None)``
* ``StreamReply([TextBlockSpec(...) | ToolCallSpec(...) | ThinkingBlockSpec(...) |
  RedactedThinkingBlockSpec(...) | "text", ...], stop_reason=...)``: any stop reason the API sends
  (``end_turn``, ``tool_use``, ``max_tokens``, ``refusal``, ...) and extended-thinking blocks
* ``ErrorReply(status, error_type=None, message=None, retry_after_ms=1)``: an HTTP error before any
  stream. ``retry-after-ms: 1`` is sent by default: the SDK ignores a retry-after of 0 and falls back
  to its 0.5 s+ exponential backoff, while a positive value is honoured as is.
* ``BreakOffReply(after_deltas=k, error_type="overloaded_error")``: HTTP 200, the stream starts, and
  after ``k`` deltas an ``event: error`` frame ends it. The SDK raises it mid-stream (as a plain
  ``APIStatusError`` with ``status_code == 200``) and does not retry it. With ``drop=True`` the
  connection is cut there instead (aborted: no error event, the body cut short).
* ``HangReply(delay=None, after_deltas=0, before_headers=False)``: the stream starts and then waits
  (forever by default) until the client disconnects, the server closes, or ``delay`` passes, after which
  the rest of the reply is sent.

Latency benchmarks (opt-in): with ``stamp_marker="@TS@"`` on a message reply, every occurrence of the
marker in a streamed delta is replaced, at the moment that delta is written to the socket, by the
wall-clock time in nanoseconds (``time.time_ns()``, 19 digits), e.g. ``TextReply(chunks=["<@TS@> "] * 500,
delay_between_deltas=0.003, stamp_marker="@TS@")``. The marker must be plain ASCII that JSON does not
escape. Without it (the default) deltas are sent exactly as scripted.

The SSE wire format follows the API: ``message_start`` (usage with input and cache tokens),
``content_block_start``, one ``ping``, ``content_block_delta`` (``text_delta`` / ``input_json_delta`` /
``thinking_delta`` and ``signature_delta``),
``content_block_stop``, ``message_delta`` (stop reason and ``output_tokens``) and ``message_stop``.
Streams are sent with chunked transfer encoding over keep-alive connections (or, with
``sse_framing="close"``, delimited by closing the connection). Without delays a whole stream goes out
in one write, so hundreds of concurrent streams of hundreds of deltas are cheap.

Title requests. Ballet asks a cheap model for a chat's title after its first turn
(``planner/live/titles.py``). A request whose system prompt opens with :data:`TITLE_SYSTEM_OPENING` is
kept apart: it takes no reply from the FIFO and is not in ``fake.requests``; it is recorded in
``fake.title_requests`` and answered from ``fake.title_replies`` (``enqueue_title()``), else by the
optional ``title_responder(request_json)``, else with ``TextReply(DEFAULT_TITLE)``. Tests that
script turns are unaffected by it. The reuse judge's requests (``planner/live/reuse_judging.py``,
system prompt opening with :data:`JUDGE_SYSTEM_OPENING`) are kept apart the same way, in
``fake.judge_requests``, answered from ``fake.judge_replies`` (``enqueue_judgement()``), else with
``TextReply(DEFAULT_JUDGEMENT)``: none asks the same.

Prompt caching. With ``prompt_cache=True`` the usage a reply reports for its input (uncached, cache
written, cache read) is that of a simulated prefix cache over the requests' ``cache_control``
breakpoints (``tests/fakes/prompt_cache.py``), also kept in ``record.usage``; the output tokens stay
as scripted.

The module uses only the standard library; it does not import the SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import http
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from functools import cached_property
from typing import Any, Final, Literal, TypeAlias

from tests.fakes.prompt_cache import PromptCache

__all__ = [
    "BreakOffReply",
    "ErrorReply",
    "FakeMessagesAPI",
    "HangReply",
    "MessageReply",
    "Outcome",
    "RecordedRequest",
    "RedactedThinkingBlockSpec",
    "Reply",
    "Responder",
    "StreamReply",
    "TextBlockSpec",
    "TextReply",
    "ThinkingBlockSpec",
    "ToolCallSpec",
    "ToolUseReply",
    "Usage",
    "history_problems",
]

MESSAGES_PATH: Final = "/v1/messages"
# planner/live/titles.py's TITLE_SYSTEM opens so (tests/fakes/test_messages_api.py checks they agree).
TITLE_SYSTEM_OPENING: Final = "You name chats."
DEFAULT_TITLE: Final = "A fake chat title"
# planner/domain/services/reuse_judge.py's JUDGE_SYSTEM opens so.
JUDGE_SYSTEM_OPENING: Final = "You compare questions."
DEFAULT_JUDGEMENT: Final = "0"
DEFAULT_MODEL: Final = "claude-fake"

_MAX_HEAD_BYTES: Final = 1 << 20
_MAX_BODY_BYTES: Final = 64 << 20
_ACCEPT_BACKLOG: Final = 2048
_CLOSE_TIMEOUT: Final = 5.0
_RELEASE_POLL_SECONDS: Final = 0.02

_DEFAULT_ERROR_TYPES: Final[Mapping[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_DEFAULT_ERROR_MESSAGES: Final[Mapping[str, str]] = {
    "invalid_request_error": "Invalid request",
    "authentication_error": "invalid x-api-key",
    "billing_error": "Your credit balance is too low",
    "permission_error": "Your API key does not have permission to use the specified resource.",
    "not_found_error": "Not found",
    "request_too_large": "Request exceeds the maximum allowed number of bytes.",
    "rate_limit_error": "Number of requests has exceeded your rate limit",
    "api_error": "Internal server error",
    "timeout_error": "Request timed out",
    "overloaded_error": "Overloaded",
}
_STATUS_FOR_ERROR_TYPE: Final[Mapping[str, int]] = {
    error_type: status for status, error_type in _DEFAULT_ERROR_TYPES.items()
}


# --------------------------------------------------------------------------------------------------
# Reply specifications
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """Token counts. ``message_start`` carries the input and cache counts, ``message_delta`` the output."""

    input_tokens: int = 10
    output_tokens: int = 20
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def as_json(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "output_tokens": self.output_tokens,
        }

    def start_json(self) -> dict[str, int]:
        # Like the API, ``message_start`` reports the input side and a placeholder output count.
        return {**self.as_json(), "output_tokens": min(1, self.output_tokens)}


def _split(text: str, chunks: int | Sequence[str], what: str) -> tuple[str, ...]:
    """``text`` cut into ``chunks`` nearly equal pieces, or the explicit pieces checked against it."""
    if isinstance(chunks, str):
        raise TypeError(f"{what}: chunks must be an int or a list of strings, not a str")
    if isinstance(chunks, int):
        if chunks < 1:
            raise ValueError(f"{what}: chunks must be >= 1, got {chunks}")
        if not text:
            return ()
        if chunks > len(text):
            raise ValueError(f"{what}: cannot split {len(text)} characters into {chunks} deltas")
        size = len(text)
        return tuple(text[i * size // chunks : (i + 1) * size // chunks] for i in range(chunks))
    pieces = tuple(chunks)
    if not all(isinstance(piece, str) for piece in pieces):
        raise TypeError(f"{what}: explicit chunks must all be strings")
    return pieces


@dataclass(frozen=True)
class TextBlockSpec:
    """A text content block, streamed as ``chunks`` text deltas (a count or the explicit pieces)."""

    text: str = ""
    _: KW_ONLY
    chunks: int | Sequence[str] = 1

    def __post_init__(self) -> None:
        if not isinstance(self.chunks, int) and not isinstance(self.chunks, str):
            joined = "".join(_split("", self.chunks, "TextBlockSpec"))
            if not self.text:
                object.__setattr__(self, "text", joined)
            elif joined != self.text:
                raise ValueError(f"TextBlockSpec: chunks join to {joined!r}, not to text {self.text!r}")
            object.__setattr__(self, "chunks", tuple(self.chunks))
        _split(self.text, self.chunks, "TextBlockSpec")

    def deltas(self) -> tuple[str, ...]:
        return _split(self.text, self.chunks, "TextBlockSpec")

    def delta_frames(self, index: int) -> tuple[bytes, ...]:
        """The rendered ``text_delta`` events at block ``index`` (cached: replies are often reused)."""
        return _cached_frames(self, index, "text_delta", "text")


@dataclass(frozen=True)
class ToolCallSpec:
    """A ``tool_use`` block; its input JSON is streamed over ``json_chunks`` ``input_json_delta`` events.

    ``json_chunks`` may also be the explicit ``partial_json`` pieces; they are sent as given (even if they
    do not form valid JSON, to test a consumer's error path) while non-streaming replies use ``input``.
    ``id`` defaults to a generated ``toolu_fake_N``.
    """

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    _: KW_ONLY
    id: str | None = None
    json_chunks: int | Sequence[str] = 1

    def __post_init__(self) -> None:
        if not isinstance(self.json_chunks, int) and not isinstance(self.json_chunks, str):
            object.__setattr__(self, "json_chunks", tuple(self.json_chunks))
        self.deltas()

    def input_json(self) -> str:
        return json.dumps(dict(self.input))

    def deltas(self) -> tuple[str, ...]:
        return _split(self.input_json(), self.json_chunks, f"ToolCallSpec({self.name!r})")

    def delta_frames(self, index: int) -> tuple[bytes, ...]:
        """The rendered ``input_json_delta`` events at block ``index`` (cached)."""
        return _cached_frames(self, index, "input_json_delta", "partial_json")


@dataclass(frozen=True)
class ThinkingBlockSpec:
    """A ``thinking`` block (extended thinking): ``thinking_delta`` events over ``chunks``, then one
    ``signature_delta``, as the API streams it."""

    thinking: str = ""
    _: KW_ONLY
    chunks: int | Sequence[str] = 1
    signature: str = "sig_fake"

    def __post_init__(self) -> None:
        if not isinstance(self.chunks, int) and not isinstance(self.chunks, str):
            object.__setattr__(self, "chunks", tuple(self.chunks))
        self.deltas()

    def deltas(self) -> tuple[str, ...]:
        return _split(self.thinking, self.chunks, "ThinkingBlockSpec")

    def delta_frames(self, index: int) -> tuple[bytes, ...]:
        """The ``thinking_delta`` events and the closing ``signature_delta`` at block ``index``."""
        signature = {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "signature_delta", "signature": self.signature},
        }
        return (*_cached_frames(self, index, "thinking_delta", "thinking"), _sse_json(signature))


@dataclass(frozen=True)
class RedactedThinkingBlockSpec:
    """A ``redacted_thinking`` block: its encrypted ``data`` in the block start, no deltas."""

    data: str = "redacted_fake"

    def deltas(self) -> tuple[str, ...]:
        return ()

    def delta_frames(self, index: int) -> tuple[bytes, ...]:
        return ()


BlockSpec: TypeAlias = TextBlockSpec | ToolCallSpec | ThinkingBlockSpec | RedactedThinkingBlockSpec


def _cached_frames(spec: BlockSpec, index: int, delta_type: str, key: str) -> tuple[bytes, ...]:
    cache: dict[int, tuple[bytes, ...]] = spec.__dict__.setdefault("_frame_cache", {})
    frames = cache.get(index)
    if frames is None:
        head = f'event: content_block_delta\ndata: {{"type":"content_block_delta","index":{index},'
        head += f'"delta":{{"type":"{delta_type}","{key}":'
        frames = tuple(f"{head}{json.dumps(piece)}}}}}\n\n".encode() for piece in spec.deltas())
        cache[index] = frames
    return frames


@dataclass(frozen=True, kw_only=True)
class _MessageOptions:
    usage: Usage = Usage()
    stop_sequence: str | None = None
    delay_between_deltas: float = 0.0
    model: str | None = None
    """Overrides the echoed request model."""
    message_id: str | None = None
    """Overrides the generated ``msg_fake_N``."""
    stamp_marker: str | None = None
    """Opt-in: replaced in each streamed delta by ``time.time_ns()`` as the delta is written."""

    def __post_init__(self) -> None:
        marker = self.stamp_marker
        if marker is not None and (not marker or not marker.isascii() or json.dumps(marker)[1:-1] != marker):
            raise ValueError(f"stamp_marker must be non-empty ASCII that JSON leaves as is, not {marker!r}")


@dataclass(frozen=True)
class StreamReply(_MessageOptions):
    """A message of any mix of text and tool_use blocks (a plain ``str`` block is one text delta)."""

    blocks: Sequence[BlockSpec | str] = ()
    stop_reason: str = field(default="end_turn", kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        blocks = tuple(TextBlockSpec(b) if isinstance(b, str) else b for b in self.blocks)
        object.__setattr__(self, "blocks", blocks)

    def block_specs(self) -> tuple[BlockSpec, ...]:
        return tuple(b for b in self.blocks if not isinstance(b, str))

    def as_stream_reply(self) -> StreamReply:
        return self


@dataclass(frozen=True)
class TextReply(_MessageOptions):
    """A single text block, streamed as ``chunks`` deltas (a count, or the explicit delta strings)."""

    text: str = ""
    chunks: int | Sequence[str] = field(default=1, kw_only=True)
    stop_reason: str = field(default="end_turn", kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        spec = TextBlockSpec(self.text, chunks=self.chunks)  # validates
        object.__setattr__(self, "text", spec.text)
        object.__setattr__(self, "chunks", spec.chunks)

    def as_stream_reply(self) -> StreamReply:
        return self._stream_reply

    @cached_property
    def _stream_reply(self) -> StreamReply:
        return StreamReply(
            [TextBlockSpec(self.text, chunks=self.chunks)],
            stop_reason=self.stop_reason,
            usage=self.usage,
            stop_sequence=self.stop_sequence,
            delay_between_deltas=self.delay_between_deltas,
            model=self.model,
            message_id=self.message_id,
            stamp_marker=self.stamp_marker,
        )


@dataclass(frozen=True)
class ToolUseReply(_MessageOptions):
    """Optional text first, then one ``tool_use`` block per ``ToolCallSpec``; stops with ``tool_use``."""

    tool_calls: Sequence[ToolCallSpec] = ()
    text_before: str | None = field(default=None, kw_only=True)
    text_chunks: int | Sequence[str] = field(default=1, kw_only=True)
    stop_reason: str = field(default="tool_use", kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if self.text_before is not None:
            TextBlockSpec(self.text_before, chunks=self.text_chunks)  # validates

    def as_stream_reply(self) -> StreamReply:
        return self._stream_reply

    @cached_property
    def _stream_reply(self) -> StreamReply:
        blocks: list[BlockSpec] = []
        if self.text_before is not None:
            blocks.append(TextBlockSpec(self.text_before, chunks=self.text_chunks))
        blocks.extend(self.tool_calls)
        return StreamReply(
            blocks,
            stop_reason=self.stop_reason,
            usage=self.usage,
            stop_sequence=self.stop_sequence,
            delay_between_deltas=self.delay_between_deltas,
            model=self.model,
            message_id=self.message_id,
            stamp_marker=self.stamp_marker,
        )


MessageReply: TypeAlias = TextReply | ToolUseReply | StreamReply


def _delta_count(reply: MessageReply) -> int:
    blocks = reply.as_stream_reply().block_specs()
    return sum(len(block.delta_frames(index)) for index, block in enumerate(blocks))


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error answered before any stream: ``{"type": "error", "error": {"type", "message"}}``.

    ``error_type`` and ``message`` default from ``status``. ``retry_after_ms`` (default 1) is sent as
    ``retry-after-ms`` so the SDK's retries of 408/409/429/5xx take milliseconds; ``None`` leaves the SDK
    to its own backoff. ``should_retry`` sends ``x-should-retry``, which overrides the SDK's policy.
    """

    status: int = 529
    _: KW_ONLY
    error_type: str | None = None
    message: str | None = None
    retry_after_ms: int | None = 1
    should_retry: bool | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def resolved_type(self) -> str:
        return self.error_type or _DEFAULT_ERROR_TYPES.get(self.status, "api_error")

    @property
    def resolved_message(self) -> str:
        if self.message is not None:
            return self.message
        return _DEFAULT_ERROR_MESSAGES.get(self.resolved_type, self.resolved_type)


@dataclass(frozen=True)
class BreakOffReply:
    """HTTP 200 and a stream that, after ``after_deltas`` deltas, sends ``event: error`` and ends.

    ``reply`` is the message being streamed (default: a text of ``after_deltas + 1`` deltas
    ``"part 0 "``, ``"part 1 "``, ...). A non-streaming request gets the error as an HTTP error instead
    (529 for ``overloaded_error``), which the SDK may retry.
    """

    after_deltas: int = 1
    _: KW_ONLY
    error_type: str = "overloaded_error"
    message: str = "Overloaded"
    reply: MessageReply | None = None
    drop: bool = False  # cut the connection there instead (a reset, no error event, the body cut short)

    def __post_init__(self) -> None:
        if self.after_deltas < 0:
            raise ValueError("BreakOffReply: after_deltas must be >= 0")
        if self.reply is not None and self.after_deltas > _delta_count(self.reply):
            raise ValueError(
                f"BreakOffReply: after_deltas={self.after_deltas} but the reply has only "
                f"{_delta_count(self.reply)} deltas"
            )

    def message_reply(self) -> MessageReply:
        if self.reply is not None:
            return self.reply
        return TextReply(chunks=[f"part {i} " for i in range(self.after_deltas + 1)])


@dataclass(frozen=True)
class HangReply:
    """A reply that stalls: after ``after_deltas`` deltas (or, with ``before_headers``, before any byte).

    It waits ``delay`` seconds (``None``: until the client disconnects or the fake closes), or until the
    test sets ``release`` (a ``threading.Event``), then sends the rest of ``reply`` (default: the text
    ``"done"``). A non-streaming request waits before its response.
    """

    delay: float | None = None
    _: KW_ONLY
    after_deltas: int = 0
    before_headers: bool = False
    reply: MessageReply | None = None
    release: threading.Event | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.after_deltas < 0:
            raise ValueError("HangReply: after_deltas must be >= 0")
        if self.after_deltas > _delta_count(self.message_reply()):
            raise ValueError(f"HangReply: after_deltas={self.after_deltas} exceeds the reply's deltas")

    def message_reply(self) -> MessageReply:
        return self.reply if self.reply is not None else TextReply("done")


Reply: TypeAlias = TextReply | ToolUseReply | StreamReply | ErrorReply | BreakOffReply | HangReply


def message_text(message: dict[str, Any]) -> str:
    """The text of a request's message (a string, or the text of its text blocks), for scripts
    that answer by what the human wrote."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def history_problems(messages: Any) -> list[str]:
    """What the Messages API would refuse in a request's ``messages`` (empty: nothing).

    Roles alternate from a user message; no message is empty; every ``tool_use`` of an
    assistant message is answered by a ``tool_result`` with its id in the very next
    message, and every ``tool_result`` answers a ``tool_use`` of the message before it.
    """
    if not isinstance(messages, list) or not messages:
        return ["a request needs messages"]
    problems: list[str] = []
    if not isinstance(messages[0], dict) or messages[0].get("role") != "user":
        problems.append("the first message must be the user's")
    previous_uses: set[str] = set()
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        blocks: list[dict[str, Any]] = (
            [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        )
        if not blocks:
            problems.append(f"message {index} is empty")
        if any(b.get("type") == "text" and not str(b.get("text", "")).strip() for b in blocks):
            problems.append(f"message {index} has an empty text block")
        if index and message.get("role") == messages[index - 1].get("role"):
            problems.append(f"message {index}: roles must alternate")
        answered = {str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"}
        if answered - previous_uses:
            extra = sorted(answered - previous_uses)
            problems.append(f"message {index}: tool_result {extra} answers no tool_use")
        if previous_uses - answered:
            missing = sorted(previous_uses - answered)
            problems.append(f"message {index}: tool_use {missing} has no tool_result")
        previous_uses = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
    if previous_uses:
        problems.append("the request ends in a tool_use without its tool_result")
    return problems


Responder: TypeAlias = Callable[[dict[str, Any]], Reply | None]

Outcome: TypeAlias = Literal[
    "pending",
    "completed",
    "error_reply",
    "broke_off",
    "dropped",
    "client_disconnected",
    "server_closed",
    "unscripted",
    "responder_error",
    "not_found",
    "bad_request",
]


@dataclass
class RecordedRequest:
    """One request the fake received.

    ``outcome`` is set before the last byte of the response is written, so a client that has seen the
    whole response also sees it; ``finished`` is set once the fake is done with the request (needed to
    observe ``client_disconnected`` after a client gave up).
    """

    index: int
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any = None
    reply: Reply | None = None
    outcome: Outcome = "pending"
    usage: Usage | None = None
    """The usage sent, when the fake simulates the prompt cache (``prompt_cache=True``)."""
    finished: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    @property
    def stream(self) -> bool:
        return isinstance(self.json, dict) and self.json.get("stream") is True


# --------------------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------------------


class _BadRequestError(Exception):
    pass


class _ClientGoneError(Exception):
    pass


@dataclass
class _HttpRequest:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Overloaded" if status == 529 else "Unknown"


async def _read_chunked_body(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise _BadRequestError("bad chunk size") from exc
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                pass
            return b"".join(parts)
        total += size
        if total > _MAX_BODY_BYTES:
            raise _BadRequestError("body too large")
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    """Method, target, HTTP version and headers (lower-case names, repeats joined with ", ")."""
    lines = head[:-4].decode("latin-1").lstrip("\r\n").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequestError(f"bad request line {lines[0]!r}")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise _BadRequestError(f"bad header line {line!r}")
        key, value = name.strip().lower(), value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return method, target, version, headers


async def _read_body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await _read_chunked_body(reader)
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError as exc:
        raise _BadRequestError("bad content-length") from exc
    if length < 0 or length > _MAX_BODY_BYTES:
        raise _BadRequestError("bad content-length")
    return await reader.readexactly(length) if length else b""


async def _read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> _HttpRequest | None:
    """The next request on the connection, or ``None`` when the client closed it between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise _BadRequestError("incomplete request head") from exc
    except asyncio.LimitOverrunError as exc:
        raise _BadRequestError("request head too large") from exc
    method, target, version, headers = _parse_head(head)
    connection = headers.get("connection", "").lower()
    keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    body = await _read_body(reader, headers)
    return _HttpRequest(method, target, headers, body, keep_alive)


_PING: Final = b'event: ping\ndata: {"type": "ping"}\n\n'


def _sse(event: str, data: str) -> bytes:
    return f"event: {event}\ndata: {data}\n\n".encode()


def _sse_json(data: Mapping[str, Any]) -> bytes:
    return _sse(str(data["type"]), json.dumps(data))


def _stamped(frame: bytes, stamp: bytes | None) -> bytes:
    """``frame`` with each ``stamp`` marker replaced by the wall-clock time now, in nanoseconds."""
    return frame if stamp is None else frame.replace(stamp, b"%d" % time.time_ns())


def _error_body(error_type: str, message: str, request_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "error", "error": {"type": error_type, "message": message}}
    if request_id is not None:
        body["request_id"] = request_id
    return body


class _SseBody:
    """Buffers SSE frames and writes them with as few writes as possible, chunked or close-delimited."""

    def __init__(self, writer: asyncio.StreamWriter, head: bytes, *, chunked: bool) -> None:
        self._writer = writer
        self._prefix = head
        self._chunked = chunked
        self._buffer: list[bytes] = []

    def add(self, frame: bytes) -> None:
        self._buffer.append(frame)

    def _take(self) -> bytes:
        data = b"".join(self._buffer)
        self._buffer.clear()
        if self._chunked and data:
            data = b"%x\r\n%b\r\n" % (len(data), data)
        out, self._prefix = self._prefix + data, b""
        return out

    async def flush(self) -> None:
        out = self._take()
        if out:
            self._writer.write(out)
            await self._writer.drain()

    async def finish(self) -> None:
        out = self._take()
        if self._chunked:
            out += b"0\r\n\r\n"
        self._writer.write(out)
        await self._writer.drain()


@dataclass
class _Plan:
    """A rendered stream: its SSE frames and which of them are content deltas."""

    frames: list[bytes]
    delta_positions: list[int]

    def cut(self, after_deltas: int) -> int:
        """Index of the first frame after ``after_deltas`` deltas (before the first delta for 0)."""
        if after_deltas == 0:
            return self.delta_positions[0] if self.delta_positions else len(self.frames) - 2
        return self.delta_positions[after_deltas - 1] + 1


def _whole_block(block: TextBlockSpec | ThinkingBlockSpec | RedactedThinkingBlockSpec) -> dict[str, Any]:
    """A block as a non-streaming reply's ``content`` holds it."""
    if isinstance(block, TextBlockSpec):
        return {"type": "text", "text": block.text}
    if isinstance(block, ThinkingBlockSpec):
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    return {"type": "redacted_thinking", "data": block.data}


def _block_start(block: TextBlockSpec | ThinkingBlockSpec | RedactedThinkingBlockSpec) -> dict[str, Any]:
    """A block as its ``content_block_start`` opens it (empty; its deltas fill it)."""
    if isinstance(block, TextBlockSpec):
        return {"type": "text", "text": ""}
    if isinstance(block, ThinkingBlockSpec):
        return {"type": "thinking", "thinking": "", "signature": ""}
    return {"type": "redacted_thinking", "data": block.data}


# --------------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------------


def is_title_request(body: bytes) -> bool:
    """Is this request Ballet asking for a chat's title (its system prompt opens so)?"""
    return _system_opens(body, TITLE_SYSTEM_OPENING)


def is_judge_request(body: bytes) -> bool:
    """Is this request Ballet's reuse judge (its system prompt opens so)?"""
    return _system_opens(body, JUDGE_SYSTEM_OPENING)


def _system_opens(body: bytes, opening: str) -> bool:
    try:
        data = json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError):
        return False
    system = data.get("system") if isinstance(data, dict) else None
    if isinstance(system, list):
        system = "".join(b.get("text", "") for b in system if isinstance(b, dict))
    return isinstance(system, str) and system.startswith(opening)


class FakeMessagesAPI:
    """A scripted stand-in for the Messages API on ``127.0.0.1``; see the module docstring.

    Arguments: ``replies`` to enqueue at once; ``responder(request_json)`` asked when the FIFO is empty;
    ``sse_framing`` ``"chunked"`` (keep-alive) or ``"close"`` (connection closed after each stream);
    ``ping`` sends one ``ping`` event per stream like the API; ``default_model`` answers requests
    without a ``model``; ``prompt_cache`` replaces the scripted input and cache token counts with
    those of a simulated prompt cache (``tests/fakes/prompt_cache.py``); ``keep_requests=False`` keeps
    no request once it is answered (``requests`` stays empty): a benchmark's thousands of requests,
    each with its parsed body, would fill the fake's memory and stall it in the garbage collector for
    seconds at a time, every model call waiting meanwhile. The server starts in the
    constructor; ``close()`` (idempotent, also on leaving a ``with`` block) stops it and its thread.
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        responder: Responder | None = None,
        title_responder: Responder | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        sse_framing: Literal["chunked", "close"] = "chunked",
        ping: bool = True,
        default_model: str = DEFAULT_MODEL,
        prompt_cache: bool = False,
        keep_requests: bool = True,
    ) -> None:
        self.responder = responder
        self.prompt_cache = PromptCache() if prompt_cache else None
        self.keep_requests = keep_requests
        self._numbered = {"model": 0, "title": 0, "judge": 0}  # requests received, of each kind
        self.title_responder = title_responder
        self.requests: list[RecordedRequest] = []
        self.title_requests: list[RecordedRequest] = []
        self.title_replies: deque[Reply] = deque()
        self.judge_requests: list[RecordedRequest] = []
        self.judge_replies: deque[Reply] = deque()
        self.responder_errors: list[BaseException] = []
        self.sse_framing = sse_framing
        self.ping = ping
        self.default_model = default_model
        self._host = host
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._scripted = 0
        self._message_counter = 0
        self._tool_counter = 0
        self._closed = False
        self._closing = False
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self._port = 0
        self._startup_error: BaseException | None = None
        self.enqueue(*replies)

        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(host, port), name="FakeMessagesAPI", daemon=True
        )
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            raise RuntimeError("FakeMessagesAPI could not start") from self._startup_error

    # -- public API ---------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self._port}"

    @property
    def port(self) -> int:
        return self._port

    @property
    def pending(self) -> int:
        """How many enqueued replies have not been used yet."""
        with self._lock:
            return len(self._queue)

    def enqueue(self, *replies: Reply) -> None:
        """Append replies to the FIFO that answers requests in order of arrival."""
        for reply in replies:
            if not isinstance(
                reply, TextReply | ToolUseReply | StreamReply | ErrorReply | BreakOffReply | HangReply
            ):
                raise TypeError(f"not a reply: {reply!r}")
        with self._lock:
            self._queue.extend(replies)
            self._scripted += len(replies)

    def enqueue_title(self, *replies: Reply) -> None:
        """Replies for the next title requests, in order (then ``DEFAULT_TITLE`` again)."""
        with self._lock:
            self.title_replies.extend(replies)

    def enqueue_judgement(self, *replies: Reply) -> None:
        """Replies for the next reuse judge requests, in order (then ``DEFAULT_JUDGEMENT`` again)."""
        with self._lock:
            self.judge_replies.extend(replies)

    def reset(self) -> None:
        """Forget enqueued replies and recorded requests (e.g. between benchmark rounds)."""
        with self._lock:
            self._queue.clear()
            self._scripted = 0
        self._numbered = dict.fromkeys(self._numbered, 0)
        self.requests.clear()
        self.title_requests.clear()
        self.title_replies.clear()
        self.judge_requests.clear()
        self.judge_replies.clear()
        self.responder_errors.clear()

    def close(self) -> None:
        """Stop the server, cancel in-flight responses and join the thread. Safe to call twice."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("FakeMessagesAPI.close() cannot be called from the server's own thread")
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._server is not None and not self._loop.is_closed():
            future = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
            with contextlib.suppress(Exception):
                future.result(timeout=_CLOSE_TIMEOUT)
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=_CLOSE_TIMEOUT)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> FakeMessagesAPI:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else self.base_url
        return f"<FakeMessagesAPI {state} requests={len(self.requests)} pending={self.pending}>"

    # -- loop thread --------------------------------------------------------------------------------

    def _run(self, host: str, port: int) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(
                    self._handle_connection, host, port, limit=_MAX_HEAD_BYTES, backlog=_ACCEPT_BACKLOG
                )
            )
            self._port = self._server.sockets[0].getsockname()[1]
        except BaseException as exc:  # reported to the constructor
            self._startup_error = exc
            self._loop.close()
            self._ready.set()
            return
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    async def _shutdown(self) -> None:
        # Connections are ended by aborting their transports, which wakes every wait in a handler (reads
        # see EOF, drains fail). Cancelling the handler tasks instead would make Python 3.11's
        # StreamReaderProtocol log each one as "Exception in callback".
        self._closing = True
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        current = asyncio.current_task()
        for _ in range(3):  # handlers of connections accepted just before close() may still start
            others = asyncio.all_tasks() - {current}
            if not others:
                break
            _, stragglers = await asyncio.wait(others, timeout=1.0)
            for task in stragglers:
                task.cancel()
        await self._server.wait_closed()

    async def _handle_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closing:
            writer.transport.abort()
            return
        self._writers.add(writer)
        try:
            while not self._closing:
                try:
                    request = await _read_request(reader, writer)
                except _BadRequestError as exc:
                    await self._send_json(
                        writer,
                        400,
                        _error_body("invalid_request_error", f"FakeMessagesAPI: {exc}"),
                        keep_alive=False,
                        extra=[("x-should-retry", "false")],
                    )
                    return
                if request is None or not await self._respond(request, reader, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, _ClientGoneError):
            pass
        except asyncio.CancelledError:
            # Only a straggler at shutdown gets here; ending the task normally keeps asyncio quiet.
            writer.transport.abort()
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _respond(
        self, request: _HttpRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Answers one request; whether the connection may serve another."""
        title = is_title_request(request.body)
        judge = not title and is_judge_request(request.body)
        kind = "title" if title else "judge" if judge else "model"
        record = RecordedRequest(
            index=self._numbered[kind],
            method=request.method,
            path=request.target,
            headers=request.headers,
            body=request.body,
        )
        self._numbered[kind] += 1
        if self.keep_requests:
            (self.title_requests if title else self.judge_requests if judge else self.requests).append(record)
        try:
            keep_open = await self._dispatch(record, request, reader, writer, title=title, judge=judge)
        except asyncio.CancelledError:
            if record.outcome == "pending":
                record.outcome = "server_closed"
            raise
        except (ConnectionError, _ClientGoneError):
            record.outcome = "server_closed" if self._closing else "client_disconnected"
            return False
        finally:
            record.finished.set()
        return keep_open and request.keep_alive

    async def _dispatch(
        self,
        record: RecordedRequest,
        request: _HttpRequest,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        title: bool = False,
        judge: bool = False,
    ) -> bool:
        request_id = f"req_fake_{'title_' if title else 'judge_' if judge else ''}{record.index}"
        keep_alive = request.keep_alive
        no_retry = [("x-should-retry", "false")]
        if request.method != "POST" or request.target.split("?", 1)[0] != MESSAGES_PATH:
            record.outcome = "not_found"
            message = (
                f"FakeMessagesAPI only serves POST {MESSAGES_PATH}, not {request.method} {request.target}"
            )
            body = _error_body("not_found_error", message, request_id)
            await self._send_json(
                writer, 404, body, keep_alive=keep_alive, extra=no_retry, request_id=request_id
            )
            return True
        try:
            record.json = json.loads(request.body) if request.body else None
        except (ValueError, UnicodeDecodeError):
            record.json = None
        if not isinstance(record.json, dict):
            record.outcome = "bad_request"
            body = _error_body(
                "invalid_request_error", "FakeMessagesAPI: body is not a JSON object", request_id
            )
            await self._send_json(
                writer, 400, body, keep_alive=keep_alive, extra=no_retry, request_id=request_id
            )
            return True

        try:
            if title:
                reply: Reply | None = self._title_reply(record.json)
            elif judge:
                reply = self._judge_reply()
            else:
                reply = self._next_reply(record.json)
        except Exception as exc:  # a broken responder must fail the test loudly, not hang it
            self.responder_errors.append(exc)
            record.outcome = "responder_error"
            message = f"FakeMessagesAPI: the responder raised {exc!r} for request #{record.index}"
            body = _error_body("api_error", message, request_id)
            await self._send_json(
                writer, 500, body, keep_alive=keep_alive, extra=no_retry, request_id=request_id
            )
            return True
        record.reply = reply
        if reply is None:
            record.outcome = "unscripted"
            body = _error_body("api_error", self._unscripted_message(record), request_id)
            await self._send_json(
                writer, 500, body, keep_alive=keep_alive, extra=no_retry, request_id=request_id
            )
            return True
        return await self._answer(record, reply, reader, writer, request_id=request_id, keep_alive=keep_alive)

    def _title_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self.title_replies:
                return self.title_replies.popleft()
        reply = self.title_responder(body) if self.title_responder is not None else None
        return reply if reply is not None else TextReply(DEFAULT_TITLE)

    def _judge_reply(self) -> Reply:
        with self._lock:
            if self.judge_replies:
                return self.judge_replies.popleft()
        return TextReply(DEFAULT_JUDGEMENT)

    def _next_reply(self, body: dict[str, Any]) -> Reply | None:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(body)
        return None

    def _unscripted_message(self, record: RecordedRequest) -> str:
        body = record.json if isinstance(record.json, dict) else {}
        preview = ""
        messages = body.get("messages")
        if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
            content = messages[-1].get("content")
            if isinstance(content, list):
                texts = [
                    c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text"
                ]
                content = " ".join(texts) if texts else f"<{len(content)} content blocks>"
            preview = f", last message {str(content)[:80]!r}"
        return (
            f"FakeMessagesAPI: no reply scripted for request #{record.index} "
            f"({record.method} {record.path}, model={body.get('model')!r}, stream={record.stream}{preview}); "
            f"{self._scripted} replies were enqueued in total. Enqueue more replies or set a responder."
        )

    async def _answer(
        self,
        record: RecordedRequest,
        reply: Reply,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        request_id: str,
        keep_alive: bool,
    ) -> bool:
        assert isinstance(record.json, dict)
        model = record.json.get("model")
        model = model if isinstance(model, str) else self.default_model
        if isinstance(reply, ErrorReply):
            return await self._send_error_reply(
                record, reply, writer, request_id=request_id, keep_alive=keep_alive
            )
        if isinstance(reply, BreakOffReply) and not record.stream:
            status = _STATUS_FOR_ERROR_TYPE.get(reply.error_type, 500)
            as_error = ErrorReply(status, error_type=reply.error_type, message=reply.message)
            return await self._send_error_reply(
                record, as_error, writer, request_id=request_id, keep_alive=keep_alive
            )
        hang: HangReply | None = reply if isinstance(reply, HangReply) else None
        waits_before_headers = hang is not None and (hang.before_headers or not record.stream)
        if hang is not None and waits_before_headers:
            gone = await self._wait_or_gone(reader, hang.delay, hang.release)
            if gone:
                raise _ClientGoneError
        message_reply = reply.message_reply() if isinstance(reply, BreakOffReply | HangReply) else reply
        stream_reply = message_reply.as_stream_reply()
        if self.prompt_cache is not None:
            uncached, written, read = self.prompt_cache.usage(record.json)
            record.usage = dataclasses.replace(
                stream_reply.usage,
                input_tokens=uncached,
                cache_creation_input_tokens=written,
                cache_read_input_tokens=read,
            )
            stream_reply = dataclasses.replace(stream_reply, usage=record.usage)
        if not record.stream:
            payload = self._message_json(stream_reply, model)
            record.outcome = "completed"
            await self._send_json(writer, 200, payload, keep_alive=keep_alive, request_id=request_id)
            return True

        plan = self._render_stream(stream_reply, model)
        break_at = reply.after_deltas if isinstance(reply, BreakOffReply) else None
        hang_at = hang.after_deltas if hang is not None and not hang.before_headers else None
        chunked = self.sse_framing == "chunked"
        headers = [
            ("content-type", "text/event-stream; charset=utf-8"),
            ("cache-control", "no-cache"),
            ("request-id", request_id),
            ("transfer-encoding", "chunked") if chunked else ("connection", "close"),
        ]
        sse = _SseBody(
            writer, self._head(200, headers, keep_alive=keep_alive or not chunked), chunked=chunked
        )
        delay = stream_reply.delay_between_deltas
        marker = stream_reply.stamp_marker
        stamp = json.dumps(marker)[1:-1].encode() if marker is not None else None
        frames = plan.frames
        if break_at is not None:
            assert isinstance(reply, BreakOffReply)
            await self._emit(sse, plan, 0, plan.cut(break_at), delay=delay, reader=reader, stamp=stamp)
            return await self._break_off(reply, record, sse, writer) and chunked
        if hang is not None and hang_at is not None:
            cut = plan.cut(hang_at)
            await self._emit(sse, plan, 0, cut, delay=delay, reader=reader, stamp=stamp)
            await sse.flush()
            if await self._wait_or_gone(reader, hang.delay, hang.release):
                raise _ClientGoneError
            await self._emit(sse, plan, cut, len(frames), delay=delay, reader=reader, stamp=stamp)
        else:
            await self._emit(sse, plan, 0, len(frames), delay=delay, reader=reader, stamp=stamp)
        record.outcome = "completed"
        await sse.finish()
        return chunked

    async def _break_off(
        self, reply: BreakOffReply, record: RecordedRequest, sse: _SseBody, writer: asyncio.StreamWriter
    ) -> bool:
        """End a stream mid-answer as ``reply`` says: an error event, or the connection cut; whether
        the connection may serve another request."""
        if reply.drop:
            await sse.flush()
            record.outcome = "dropped"
            writer.transport.abort()
            return False
        sse.add(_sse("error", json.dumps(_error_body(reply.error_type, reply.message))))
        record.outcome = "broke_off"
        await sse.finish()
        return True

    # -- rendering ----------------------------------------------------------------------------------

    def _new_message_id(self, reply: StreamReply) -> str:
        if reply.message_id is not None:
            return reply.message_id
        self._message_counter += 1
        return f"msg_fake_{self._message_counter}"

    def _tool_id(self, spec: ToolCallSpec, assigned: dict[int, str], position: int) -> str:
        if spec.id is not None:
            return spec.id
        if position not in assigned:
            self._tool_counter += 1
            assigned[position] = f"toolu_fake_{self._tool_counter}"
        return assigned[position]

    def _message_json(self, reply: StreamReply, model: str) -> dict[str, Any]:
        assigned: dict[int, str] = {}
        content: list[dict[str, Any]] = []
        for position, block in enumerate(reply.block_specs()):
            if isinstance(block, ToolCallSpec):
                tool_id = self._tool_id(block, assigned, position)
                content.append(
                    {"type": "tool_use", "id": tool_id, "name": block.name, "input": dict(block.input)}
                )
            else:
                content.append(_whole_block(block))
        return {
            "id": self._new_message_id(reply),
            "type": "message",
            "role": "assistant",
            "model": reply.model or model,
            "content": content,
            "stop_reason": reply.stop_reason,
            "stop_sequence": reply.stop_sequence,
            "usage": reply.usage.as_json(),
        }

    def _render_stream(self, reply: StreamReply, model: str) -> _Plan:
        assigned: dict[int, str] = {}
        message: dict[str, Any] = {
            "id": self._new_message_id(reply),
            "type": "message",
            "role": "assistant",
            "model": reply.model or model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": reply.usage.start_json(),
        }
        frames = [_sse("message_start", json.dumps({"type": "message_start", "message": message}))]
        deltas: list[int] = []
        for index, block in enumerate(reply.block_specs()):
            if isinstance(block, ToolCallSpec):
                tool_id = self._tool_id(block, assigned, index)
                start: dict[str, Any] = {"type": "tool_use", "id": tool_id, "name": block.name, "input": {}}
            else:
                start = _block_start(block)
            block_start = {"type": "content_block_start", "index": index, "content_block": start}
            frames.append(_sse("content_block_start", json.dumps(block_start)))
            if index == 0 and self.ping:
                frames.append(_PING)
            delta_frames = block.delta_frames(index)
            deltas.extend(range(len(frames), len(frames) + len(delta_frames)))
            frames.extend(delta_frames)
            frames.append(_sse("content_block_stop", f'{{"type":"content_block_stop","index":{index}}}'))
        if not reply.block_specs() and self.ping:
            frames.append(_PING)
        message_delta = {
            "type": "message_delta",
            "delta": {"stop_reason": reply.stop_reason, "stop_sequence": reply.stop_sequence},
            "usage": {"output_tokens": reply.usage.output_tokens},
        }
        frames.append(_sse("message_delta", json.dumps(message_delta)))
        frames.append(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
        return _Plan(frames, deltas)

    # -- writing ------------------------------------------------------------------------------------

    @staticmethod
    def _head(status: int, headers: Sequence[tuple[str, str]], *, keep_alive: bool) -> bytes:
        lines = [f"HTTP/1.1 {status} {_reason(status)}", *(f"{name}: {value}" for name, value in headers)]
        if not keep_alive and ("connection", "close") not in headers:
            lines.append("connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _send_json(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        payload: Mapping[str, Any],
        *,
        keep_alive: bool,
        extra: Sequence[tuple[str, str]] = (),
        request_id: str | None = None,
    ) -> None:
        body = json.dumps(payload).encode()
        headers = [("content-type", "application/json"), ("content-length", str(len(body)))]
        if request_id is not None:
            headers.append(("request-id", request_id))
        headers.extend(extra)
        writer.write(self._head(status, headers, keep_alive=keep_alive) + body)
        await writer.drain()

    async def _send_error_reply(
        self,
        record: RecordedRequest,
        reply: ErrorReply,
        writer: asyncio.StreamWriter,
        *,
        request_id: str,
        keep_alive: bool,
    ) -> bool:
        extra: list[tuple[str, str]] = []
        if reply.retry_after_ms is not None:
            extra.append(("retry-after-ms", str(reply.retry_after_ms)))
        if reply.should_retry is not None:
            extra.append(("x-should-retry", "true" if reply.should_retry else "false"))
        extra.extend(reply.headers.items())
        body = _error_body(reply.resolved_type, reply.resolved_message, request_id)
        record.outcome = "error_reply"
        await self._send_json(
            writer, reply.status, body, keep_alive=keep_alive, extra=extra, request_id=request_id
        )
        return True

    @staticmethod
    async def _emit(
        sse: _SseBody,
        plan: _Plan,
        start: int,
        stop: int,
        *,
        delay: float,
        reader: asyncio.StreamReader,
        stamp: bytes | None = None,
    ) -> None:
        """Queues frames ``start:stop``; with a delay, deltas are flushed one by one with pauses between.

        With ``stamp`` (a reply's ``stamp_marker``), each delta gets the time it is queued in its place."""
        if delay <= 0 and stamp is None:
            for frame in plan.frames[start:stop]:
                sse.add(frame)
            return
        is_delta = set(plan.delta_positions)
        last_delta = plan.delta_positions[-1] if plan.delta_positions else -1
        for position in range(start, stop):
            frame = plan.frames[position]
            sse.add(_stamped(frame, stamp) if position in is_delta else frame)
            if delay > 0 and position in is_delta:
                await sse.flush()
                if position != last_delta:
                    await asyncio.sleep(delay)
                if reader.at_eof():
                    raise _ClientGoneError

    @staticmethod
    async def _wait_or_gone(
        reader: asyncio.StreamReader, delay: float | None, release: threading.Event | None = None
    ) -> bool:
        """Waits ``delay`` seconds (``None``: forever) or until ``release`` is set; ``True`` if the client
        went away meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = None if delay is None else loop.time() + delay
        # The SDK sends nothing while awaiting a response: any return of the read is EOF.
        gone = asyncio.ensure_future(reader.read(1))
        try:
            while True:
                waits = [] if release is None else [_RELEASE_POLL_SECONDS]
                if deadline is not None:
                    waits.append(max(0.0, deadline - loop.time()))
                done, _ = await asyncio.wait({gone}, timeout=min(waits, default=None))
                if done:
                    return True
                if (release is not None and release.is_set()) or (
                    deadline is not None and loop.time() >= deadline
                ):
                    return False
        finally:
            gone.cancel()
            await asyncio.wait({gone})  # the reader is free again for the connection's next request
