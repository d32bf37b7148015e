"""Clearing stale tool results from what a model call sends, pure.

Where it sits: docs/architecture.md#clearing-stale-tool-results.

A session's old tool results (a ``list_items`` of 20 tickets is about 4 KB)
would otherwise go out again with every later call. The request keeps every
tool_use and its tool_result block, but an old result's content becomes
:data:`STUB`. Only what is sent changes: the stored transcript, the frames and
what the transcript's readers get stay complete.

Results are cleared in batches, as the Messages API's ``clear_tool_uses``
context edit does, so that between two clearing events every request starts
with the previous request byte for byte and the prompt cache keeps hitting.
Which results are cleared is a function of the messages alone (their order and
sizes), replayed from the first message after the summary: the request a
restart, another process or a retry builds is the same, and nothing is stored.

The replay: after each message that adds tool results, if the results not yet
cleared hold more than :data:`TRIGGER_TOKENS`, every result but the latest
:data:`KEEP_RESULTS` (and never one the model has not seen yet, those of
that very message) is cleared at once, provided that frees at least
:data:`MIN_CLEAR_TOKENS`; otherwise nothing is cleared until it would. A result
no longer than the stub is left as it is.

The thresholds are constants, not settings: they trade the cost of rewriting
the cache at an event against re-reading old results at every call, which
depends on the pricing, not on a deployment or a project.
"""

from __future__ import annotations

from collections.abc import Sequence

from planner.agent.messages import ChatMessage, ToolResultBlock

CHARS_PER_TOKEN = 4  # as compaction.CHARS_PER_TOKEN
STUB = "Result cleared to save context; call the tool again if you need it."
TRIGGER_TOKENS = 20_000
"""Clear once the uncleared tool results of the request hold more than this (about 80 KB)."""
KEEP_RESULTS = 3
"""The latest results always go out whole: a round's worth (the benchmark's rounds make three calls)."""
MIN_CLEAR_TOKENS = 10_000
"""An event clears at least this much, so events (each rewrites the cache after its first cleared
result) are rare: about one per ``MIN_CLEAR_TOKENS`` of new results."""


def result_tokens(block: ToolResultBlock) -> int:
    return len(block.content) // CHARS_PER_TOKEN


def cleared_results(messages: Sequence[ChatMessage]) -> frozenset[str]:
    """The tool_use ids whose results the request sends as :data:`STUB`."""
    results: list[ToolResultBlock] = []  # clearable results, in order
    cleared = 0  # results[:cleared] are cleared
    live = 0  # tokens of results[cleared:]
    for message in messages:
        fresh = [b for b in message.content if isinstance(b, ToolResultBlock) and len(b.content) > len(STUB)]
        if not fresh:
            continue
        results.extend(fresh)
        live += sum(result_tokens(b) for b in fresh)
        if live <= TRIGGER_TOKENS:
            continue
        upto = min(len(results) - KEEP_RESULTS, len(results) - len(fresh))
        batch = sum(result_tokens(b) for b in results[cleared:upto])
        if upto > cleared and batch >= MIN_CLEAR_TOKENS:
            cleared, live = upto, live - batch
    return frozenset(b.tool_use_id for b in results[:cleared])


def clear_stale_results(messages: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
    """The messages as a request sends them: the cleared results' content replaced by :data:`STUB`.

    Every tool_use keeps its tool_result (the API requires the pair) and its ``is_error``: a call
    that failed still reads as failed. Messages with nothing cleared are the same objects.
    """
    cleared = cleared_results(messages)
    if not cleared:
        return tuple(messages)
    return tuple(_stubbed(message, cleared) for message in messages)


def _stubbed(message: ChatMessage, cleared: frozenset[str]) -> ChatMessage:
    if not any(isinstance(b, ToolResultBlock) and b.tool_use_id in cleared for b in message.content):
        return message
    content = tuple(
        ToolResultBlock(b.tool_use_id, STUB, is_error=b.is_error)
        if isinstance(b, ToolResultBlock) and b.tool_use_id in cleared
        else b
        for b in message.content
    )
    return ChatMessage(role=message.role, content=content, kind=message.kind, seq=message.seq)
