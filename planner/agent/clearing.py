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

The replay: when a turn opens (a user message that carries no tool results: the
human's message, a question, steering), if the results not yet cleared hold more
than :data:`TRIGGER_TOKENS`, every result but the latest :data:`KEEP_RESULTS` is
cleared at once, provided that frees at least :data:`MIN_CLEAR_TOKENS`. An event
rewrites the cache from its first cleared result on, so it is paid by the turn's
first call, whose new message is not cached anyway, and the turn's later calls
read all of it; small, frequent events keep each one's rewrite, and so the
costliest turn, small (docs/benchmarks.md: no turn above 4 times an early one).
Within one long turn the same happens after a message of tool results once the
uncleared results pass :data:`TURN_TOKENS` (never clearing the results the model
has not seen yet, those of that very message). A result no longer than the stub
is left as it is.

The thresholds are constants, not settings: they trade the cost of rewriting
the cache at an event against re-reading old results at every call, which
depends on the pricing, not on a deployment or a project.
"""

from __future__ import annotations

from collections.abc import Sequence

from planner.agent.messages import ChatMessage, ToolResultBlock

CHARS_PER_TOKEN = 4  # as compaction.CHARS_PER_TOKEN
STUB = "Result cleared to save context; call the tool again if you need it."
TRIGGER_TOKENS = 12_000
"""Clear when a turn opens once the uncleared tool results hold more than this (about 48 KB)."""
KEEP_RESULTS = 3
"""The latest results always go out whole: a round's worth (the benchmark's rounds make three calls)."""
MIN_CLEAR_TOKENS = 6_000
"""An event clears at least this much, so that each is worth its cache rewrite."""
TURN_TOKENS = 40_000
"""Within a turn, clear after a round's results once the uncleared ones hold more than this."""


def result_tokens(block: ToolResultBlock) -> int:
    return len(block.content) // CHARS_PER_TOKEN


def cleared_results(messages: Sequence[ChatMessage]) -> frozenset[str]:
    """The tool_use ids whose results the request sends as :data:`STUB`."""
    replay = Replay()
    replay.messages(messages)
    return replay.cleared


def clear_stale_results(
    messages: Sequence[ChatMessage], replay: Replay | None = None
) -> tuple[ChatMessage, ...]:
    """The messages as a request sends them: the cleared results' content replaced by :data:`STUB`.

    Every tool_use keeps its tool_result (the API requires the pair) and its ``is_error``: a call
    that failed still reads as failed. Messages with nothing cleared are the same objects. With
    ``replay``, the one kept for these messages' earlier calls, only what was added since is replayed.
    """
    return (replay or Replay()).messages(messages)


class Replay:
    """The replay over a history's messages, kept between its calls: a history only grows by
    appending, so a call replays the messages added since the last and reuses what it sent then
    (the messages' stubbed copies too). A history that does not go on from what was replayed (a
    compaction moved its start, a message was taken back) is replayed again from its start."""

    def __init__(self) -> None:
        self._start()

    def _start(self) -> None:
        self._seen = 0  # how many messages were replayed
        self._ends: tuple[ChatMessage, ChatMessage] | None = None  # the first and the last of them
        self._sent: list[ChatMessage] = []  # the messages as the request sends them
        self._results: list[ToolResultBlock] = []  # clearable results, in order
        self._homes: list[int] = []  # the index in _sent of each result's message
        self._cleared = 0  # _results[:_cleared] are cleared
        self._live = 0  # tokens of _results[_cleared:]
        self._event_anchor: int | None = None  # the anchor before an event the last message made

    @property
    def cleared(self) -> frozenset[str]:
        return frozenset(b.tool_use_id for b in self._results[: self._cleared])

    @property
    def anchor(self) -> int | None:
        """Where the request puts a cache breakpoint besides its end (an index among the messages
        replayed): the message before the first result not cleared yet. What the next clearing
        event leaves as it is ends there, so the requests until then write the cache there, and
        the event's request, marked where it was before the event, reads it: the event rewrites
        only what came after the last one, however long the session. Without it the rewrite
        starts wherever the cache's look-back from the request's end (20 blocks) finds a cached
        prefix: in a long session near its start. None without such a result."""
        if self._event_anchor is not None:
            return self._event_anchor
        return self._anchor_now()

    def _anchor_now(self) -> int | None:
        if self._cleared >= len(self._results) or self._homes[self._cleared] == 0:
            return None
        return self._homes[self._cleared] - 1

    def messages(self, messages: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
        if not self._goes_on(messages):
            self._start()
        for message in messages[self._seen :]:
            self._add(message)
        self._seen = len(messages)
        self._ends = (messages[0], messages[-1]) if messages else None
        return tuple(self._sent)

    def _goes_on(self, messages: Sequence[ChatMessage]) -> bool:
        if self._ends is None:
            return self._seen == 0
        first, last = self._ends
        return len(messages) >= self._seen and messages[0] is first and messages[self._seen - 1] is last

    def _add(self, message: ChatMessage) -> None:
        self._event_anchor = None
        self._sent.append(message)
        results = [b for b in message.content if isinstance(b, ToolResultBlock)]
        if message.role == "user" and not results:  # a turn opens
            if self._live > TRIGGER_TOKENS:
                self._clear(len(self._results) - KEEP_RESULTS)
            return
        fresh = [b for b in results if len(b.content) > len(STUB)]
        if not fresh:
            return
        self._results.extend(fresh)
        self._homes.extend([len(self._sent) - 1] * len(fresh))
        self._live += sum(result_tokens(b) for b in fresh)
        if self._live > TURN_TOKENS:
            self._clear(min(len(self._results) - KEEP_RESULTS, len(self._results) - len(fresh)))

    def _clear(self, upto: int) -> None:
        """Clear the results before ``upto`` not cleared yet, if that frees :data:`MIN_CLEAR_TOKENS`."""
        batch = sum(result_tokens(b) for b in self._results[self._cleared : upto])
        if upto > self._cleared and batch >= MIN_CLEAR_TOKENS:
            self._event_anchor = self._anchor_now()
            newly = frozenset(b.tool_use_id for b in self._results[self._cleared : upto])
            for home in sorted(set(self._homes[self._cleared : upto])):
                self._sent[home] = _stubbed(self._sent[home], newly)
            self._cleared, self._live = upto, self._live - batch


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
