"""The gateway's reader of server-sent events (``planner/agent/sse.py``) reads what the SDK's
decoder reads, however the bytes are cut."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

from anthropic._streaming import SSEDecoder
from hypothesis import given
from hypothesis import strategies as st

from planner.agent.sse import EventReader, ServerSentEvent

ANTHROPIC_STREAM = (
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"usage":{"input_tokens":3}}}\n\n'
    b"event: ping\n"
    b'data: {"type": "ping"}\n\n'
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"caf\xc3\xa9 \xe2\x98\x95"}}\n\n'
    b"event: message_stop\n"
    b'data: {"type":"message_stop"}\n\n'
)


def read(chunks: list[bytes]) -> list[ServerSentEvent]:
    reader = EventReader()
    return [event for chunk in chunks for event in reader.feed(chunk)]


def sdk_read(chunks: list[bytes]) -> list[ServerSentEvent]:
    """The SDK's events, less those with neither a type nor data: once a stream has sent an
    ``id``, the SDK makes one of every further blank line. The gateway skips every event
    without a type."""

    async def stream() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    async def events() -> list[ServerSentEvent]:
        events = [(sse.event, sse.data) async for sse in SSEDecoder().aiter_bytes(stream())]
        return [event for event in events if event != (None, "")]

    return asyncio.run(events())


def cut(data: bytes, points: list[int]) -> list[bytes]:
    edges = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def test_an_anthropic_stream_read_whole():
    events = read([ANTHROPIC_STREAM])
    assert [kind for kind, _ in events] == ["message_start", "ping", "content_block_delta", "message_stop"]
    assert "café ☕" in events[2][1]
    assert events == sdk_read([ANTHROPIC_STREAM])


def test_an_anthropic_stream_cut_byte_by_byte_even_inside_a_character():
    assert read([bytes([b]) for b in ANTHROPIC_STREAM]) == read([ANTHROPIC_STREAM])


def test_an_event_not_ended_by_a_blank_line_is_not_read():
    assert read([b"event: a\ndata: 1\n\nevent: b\ndata: 2\n"]) == [("a", "1")]


def test_crlf_and_cr_line_ends_split_across_chunks():
    chunks = [b"event: a\r", b"\ndata: 1\r\n\r", b"\nevent: b\rdata: 2\r", b"\r"]
    assert read(chunks) == [("a", "1"), ("b", "2")]


def test_data_lines_join_and_comments_and_other_fields_are_skipped():
    stream = b": keep-alive\nid: 7\nretry: 10\ndata: one\ndata:two\ndata\nevent:x\n\n\n\n:only a comment\n\n"
    assert read([stream]) == [("x", "one\ntwo\n")]
    assert read([stream]) == sdk_read([stream])


LINE = st.one_of(
    st.sampled_from(
        [b"event: delta", b"event:e", b"data: {}", b"data:  two spaces", b"data", b": c", b"id: 1", b""]
    ),
    st.binary(max_size=12).filter(lambda line: b"\r" not in line and b"\n" not in line),
)


@given(
    lines=st.lists(LINE, max_size=30),
    ends=st.lists(st.sampled_from([b"\n", b"\r\n", b"\r"]), min_size=1, max_size=30),
    points=st.lists(st.integers(min_value=0, max_value=2_000), max_size=8),
)
def test_reads_as_the_sdk_reads_however_the_bytes_are_cut(lines, ends, points):
    stream = b"".join(line + ends[i % len(ends)] for i, line in enumerate(lines))
    try:
        expected = sdk_read([stream])
    except UnicodeDecodeError:  # the SDK fails on bytes that are not UTF-8; the reader replaces them
        return
    assert [event for event in read(cut(stream, points)) if event != (None, "")] == expected
