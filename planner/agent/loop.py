"""The turn loop: no ORM, no channels.

A turn is rounds of: deliver waiting input (steering, change notes) →
compaction check → streamed model call → if the model called tools, run them
and go on. It ends ``completed`` when the model stops calling tools,
``max_rounds`` after that many rounds of tool calls, ``stopped`` when
:meth:`TurnLoop.stop` is called (the in-flight model call is cancelled, its
partial text kept, pending calls answered with errors) or ``failed`` on an
error retries could not mend, or on an answer the model did not finish (cut
off at its output limit, a refusal: its text is kept, its tool calls are
dropped, never run). Stopping is cooperative: only the model call is ever
cancelled, never a write, so the history stays valid. Everything durable goes
through :class:`TurnIO`, which ``planner/live/session_io.py`` implements; where the loop
sits in the path of a message: ``docs/architecture.md``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, assert_never

from prometheus_client import Counter

from planner.agent import clearing, compaction, frames
from planner.agent.calls import CallRecord, Gateway, GatewayError
from planner.agent.frames import Frame, RequestFrame, TurnEndReason
from planner.agent.messages import (
    ChatMessage,
    ModelRequest,
    ModelResponse,
    PartialAnswer,
    Provider,
    StopReason,
    TextBlock,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)

logger = logging.getLogger(__name__)
COMPACTIONS = Counter("ballet_planner_compactions_total", "Context compactions of planner sessions.")
# A summary call that answered nothing: the call went on uncompacted, so the context keeps growing.
COMPACTIONS_EMPTY = Counter(
    "ballet_planner_compactions_empty_total",
    "Compactions whose summary came back empty (the call went on uncompacted).",
)

Reason = TurnEndReason
STOPPED_RESULT = (
    '{"error": {"code": "stopped", "message": "The human stopped the turn before this call ran."}}'
)
FAILED_RESULT = '{"error": {"code": "interrupted", "message": "The turn ended before this call ran."}}'


@dataclass(frozen=True)
class TurnSettings:
    model: str
    compaction_model: str
    max_rounds: int
    max_tokens: int
    compact_at_tokens: int
    api_key: str | None = field(repr=False)
    system: str
    tools: tuple[ToolDefinition, ...]
    credential_error: str | None = None  # why the turn has no usable credential: each call fails
    provider: Provider = "anthropic"  # who answers the turn's calls (docs/architecture.md#the-demo-planner)


@dataclass(frozen=True)
class ToolRun:
    result: ToolResultBlock
    output: object
    drafts: tuple[Frame, ...] = ()


@dataclass(frozen=True)
class ToolRound:
    """A round of tool calls as the durable side ran it: the answer that made the calls, stored;
    the calls that ran, in order; their results, stored, unless the turn stopped before every
    call ran (``results`` None) or storing them failed (``error``)."""

    answer: ChatMessage
    runs: list[ToolRun]
    results: ChatMessage | None
    error: Exception | None = None
    paused: list[RequestFrame] | None = None  # the turn paused on these requests (docs/domain.md)


@dataclass(frozen=True)
class TurnOutcome:
    """How a turn's run ended: ``paused`` is no end, the turn waits for a human's answers."""

    reason: Reason | Literal["paused"]
    error: str | None = None


class TurnIO(Protocol):
    async def inputs(self) -> list[ChatMessage]: ...

    async def has_inputs(self) -> bool: ...

    async def save_assistant(self, message: ChatMessage, usage: Usage, *, last: bool = False) -> ChatMessage:
        """Store an answer; the ``last`` one (no tool calls) ends the turn unless input waits."""
        ...

    async def tool_round(
        self, answer: ChatMessage, usage: Usage, calls: list[ToolUseBlock], stopping: Callable[[], bool]
    ) -> ToolRound:
        """Store ``answer``, run its ``calls`` in order while ``stopping()`` is false, and store
        their results: one trip to the durable side for the whole round."""
        ...

    async def save_results(self, message: ChatMessage) -> ChatMessage: ...

    async def save_summary(self, summary: str, up_to: int, estimated_tokens: int) -> int:
        """Store the summary; how many knowledge drafts its durable parts left."""
        ...

    async def emit(self, frame: Frame) -> None: ...

    async def meter(self, record: CallRecord) -> None: ...


@dataclass
class History:
    """The transcript as the loop sees it, and what compaction left of it."""

    messages: list[ChatMessage]
    summary: str = ""
    summary_up_to: int | None = None
    reported_tokens: int = 0
    reported_seq: int = 0
    # What the requests' clearing replayed so far: kept with the history between its turns.
    replay: clearing.Replay = field(default_factory=clearing.Replay, repr=False, compare=False)


@dataclass
class _Round:
    """The in-flight state a stop or a failure must close cleanly."""

    partial: PartialAnswer = field(default_factory=PartialAnswer)
    pending: list[ToolUseBlock] = field(default_factory=list)
    results: list[ToolResultBlock] = field(default_factory=list)


class _Sink:
    def __init__(self, io: TurnIO, partial: PartialAnswer) -> None:
        self.io = io
        self.partial = partial

    async def on_text(self, delta: str) -> None:
        self.partial.text_parts.append(delta)
        await self.io.emit(frames.text_delta(delta))

    async def on_reset(self) -> None:
        self.partial.reset()
        await self.io.emit(frames.text_reset())


def why_unfinished(stop_reason: StopReason, *, max_tokens: int) -> str | None:
    """Why an answer that stopped for ``stop_reason`` is not one to go on from (fit to show
    the human), or None for an answer the model finished."""
    match stop_reason:
        case "end_turn" | "tool_use" | "stop_sequence":
            return None
        case "max_tokens":
            return (
                f"The answer hit the model's output limit of {max_tokens:,} tokens (max_tokens) and "
                "was cut off. Ask for a shorter answer; the server's [planner] max_output_tokens "
                "sets the limit."
            )
        case "model_context_window_exceeded":
            return "The answer filled the model's context window and was cut off."
        case "refusal":
            return "The model declined to answer (refusal); rephrase the request or start a new chat."
        case "pause_turn":
            return "The model paused its turn (pause_turn), which Ballet does not support."
        case unknown:
            assert_never(unknown)


class _StoppedError(Exception):
    """The human stopped the turn."""


class TurnLoop:
    def __init__(self, *, io: TurnIO, gateway: Gateway, settings: TurnSettings, history: History) -> None:
        self.io = io
        self.gateway = gateway
        self.settings = settings
        self.history = history
        self.round = _Round()
        self.stopping = False
        self._call: asyncio.Future[ModelResponse] | None = None
        self._sent: tuple[tuple[object, ...], tuple[ChatMessage, ...], int | None] | None = None

    def stop(self) -> None:
        """Stop at the next safe point; a streaming model call is cancelled at once."""
        self.stopping = True
        if self._call is not None and not self._call.done():
            self._call.cancel()

    def _check_stop(self) -> None:
        if self.stopping:
            raise _StoppedError

    async def run(self) -> TurnOutcome:
        """Run rounds until the turn ends; never raises for a turn's own failure."""
        try:
            return await self._rounds()
        except (_StoppedError, asyncio.CancelledError):
            await self._close(STOPPED_RESULT)
            return TurnOutcome("stopped")
        except GatewayError as exc:
            await self._close(FAILED_RESULT)
            return TurnOutcome("failed", exc.message)
        except Exception:
            logger.exception("planner turn failed")
            await self._close(FAILED_RESULT)
            return TurnOutcome("failed", "Ballet hit an internal error running this turn; it was logged.")

    async def _rounds(self) -> TurnOutcome:
        rounds = 0
        for _ in range(self.settings.max_rounds + 50):  # + room for steering-only calls
            self._check_stop()
            self.history.messages.extend(await self.io.inputs())
            if self.history.messages and self.history.messages[-1].role == "assistant":
                # It went on for steering that its author took back before it was read: the
                # last answer stands, and there is nothing new to answer.
                return TurnOutcome("completed")
            await self._maybe_compact()
            self._check_stop()
            response = await self._call_model()
            unfinished = why_unfinished(response.stop_reason, max_tokens=self.settings.max_tokens)
            if unfinished is not None:
                await self._keep_text(response)
                return TurnOutcome("failed", unfinished)
            if not response.tool_uses:
                if response.content:
                    await self._save_assistant(response, last=True)
                if await self.io.has_inputs():
                    continue
                return TurnOutcome("completed")
            if await self._tool_round(response):
                return TurnOutcome("paused")
            rounds += 1
            if rounds >= self.settings.max_rounds:
                return TurnOutcome("max_rounds")
        return TurnOutcome("max_rounds")

    def _request_messages(self) -> tuple[ChatMessage, ...]:
        """The history as the next request sends it (``compaction.request_messages``), worked out
        once for the compaction check and the call after it, replaying only what was added since
        the history's last call (``History.replay``). The history only grows by appending, and
        compaction moves its summary."""
        h = self.history
        state = (len(h.messages), h.messages[-1] if h.messages else None, h.summary_up_to, h.summary)
        if self._sent is None or self._sent[0] != state:
            sent = compaction.request_messages(h.messages, h.summary, h.summary_up_to, h.replay)
            anchor = h.replay.anchor
            if anchor is not None and h.summary and h.summary_up_to is not None:
                anchor += 1  # the summary leads what is sent
            self._sent = (state, sent, anchor)
        return self._sent[1]

    def _request(self) -> ModelRequest:
        messages = self._request_messages()
        return ModelRequest(
            model=self.settings.model,
            system=self.settings.system,
            messages=messages,
            max_tokens=self.settings.max_tokens,
            tools=self.settings.tools,
            provider=self.settings.provider,
            anchor=self._sent[2] if self._sent is not None else None,
        )

    async def _call_model(self) -> ModelResponse:
        self.round = _Round()
        try:
            return await self._complete(self._request())
        except GatewayError as exc:
            if exc.kind != "context_too_long" or not await self._maybe_compact(force=True):
                raise
        self.round = _Round()
        return await self._complete(self._request())

    async def _complete(self, request: ModelRequest) -> ModelResponse:
        if self.settings.credential_error:
            raise GatewayError("no_credential", self.settings.credential_error)
        sink = _Sink(self.io, self.round.partial)
        return await self._cancellable(
            self.gateway.complete(request, api_key=self.settings.api_key, sink=sink, meter=self.io.meter)
        )

    async def _cancellable(self, call: Coroutine[Any, Any, ModelResponse]) -> ModelResponse:
        """Await a model call (a turn's or a compaction's) that :meth:`stop` cancels at once; the
        gateway meters what a cancelled call used."""
        self._call = asyncio.ensure_future(call)
        try:
            return await self._call
        except asyncio.CancelledError:
            if self.stopping and self._call.cancelled():
                raise _StoppedError from None
            raise
        finally:
            self._call = None

    async def _save_assistant(self, response: ModelResponse, *, last: bool = False) -> None:
        message = ChatMessage(role="assistant", content=response.content, kind="assistant")
        self._answered(await self.io.save_assistant(message, response.usage, last=last), response.usage)

    def _answered(self, saved: ChatMessage, usage: Usage) -> None:
        self.round.partial.reset()
        self.history.messages.append(saved)
        self.history.reported_tokens = usage.context_tokens
        self.history.reported_seq = saved.seq

    async def _keep_text(self, response: ModelResponse) -> None:
        """Of an unfinished answer, keep what the human saw stream: its text. Its tool calls
        are dropped, never run nor left unanswered (the last one may be half-written)."""
        text = tuple(block for block in response.content if isinstance(block, TextBlock))
        if text:
            await self._save_assistant(replace(response, content=text))

    async def _tool_round(self, response: ModelResponse) -> bool:
        """Run a round of tool calls; True if the turn paused on requests to a human."""
        calls = response.tool_uses
        answer = ChatMessage(role="assistant", content=response.content, kind="assistant")
        done = await self.io.tool_round(answer, response.usage, calls, lambda: self.stopping)
        self._answered(done.answer, response.usage)
        self.round.pending = list(calls)  # only now: a call is pending once its answer is stored
        ran = {run.result.tool_use_id: run for run in done.runs}
        for call in calls:
            await self.io.emit(frames.tool_call(id=call.id, name=call.name, input=call.input))
            if (run := ran.get(call.id)) is not None:
                await self._record(call, run)
        if done.error is not None:
            raise done.error
        if done.paused:
            for request in done.paused:
                await self.io.emit(request)
            self.round = _Round()  # the answers close the round, when they come
            return True
        if done.results is None:
            raise _StoppedError
        self.history.messages.append(done.results)
        self.round = _Round()
        return False

    async def _record(self, call: ToolUseBlock, run: ToolRun) -> None:
        self.round.pending.remove(call)
        self.round.results.append(run.result)
        await self.io.emit(
            frames.tool_result(
                id=call.id, name=call.name, input=call.input, is_error=run.result.is_error, output=run.output
            )
        )
        for draft in run.drafts:
            await self.io.emit(draft)

    async def _save_results(self) -> None:
        message = ChatMessage(role="user", content=tuple(self.round.results), kind="tool_results")
        self.history.messages.append(await self.io.save_results(message))
        self.round = _Round()

    async def _close(self, pending_error: str) -> None:
        """Leave a valid history: keep partial text, answer every pending call."""
        partial = self.round.partial.text
        if partial.strip():
            message = ChatMessage(role="assistant", content=(TextBlock(partial),), kind="assistant")
            self.history.messages.append(await self.io.save_assistant(message, Usage()))
        if self.round.pending or self.round.results:
            for call in self.round.pending:
                self.round.results.append(ToolResultBlock(call.id, pending_error, is_error=True))
                await self.io.emit(
                    frames.tool_result(
                        id=call.id, name=call.name, input=call.input, is_error=True, output=pending_error
                    )
                )
            self.round.pending = []
            await self._save_results()

    async def _maybe_compact(self, *, force: bool = False) -> bool:
        h = self.history
        visible = self._request_messages()
        estimate = compaction.estimate_tokens(
            messages=visible,
            reported_tokens=h.reported_tokens,
            reported_seq=h.reported_seq,
            summary=h.summary,
            system=self.settings.system,
            tools=self.settings.tools,
        )
        if not force and not compaction.should_compact(estimate, self.settings.compact_at_tokens):
            return False
        cut = compaction.find_cut(h.messages, h.summary_up_to)
        if cut is None or not compaction.pairs_intact(h.messages, cut):
            return False
        return await self._compact(cut, estimate)

    async def _compact(self, cut: int, estimate: int) -> bool:
        h = self.history
        folded = [
            m for m in h.messages if (h.summary_up_to is None or m.seq > h.summary_up_to) and m.seq <= cut
        ]
        request = compaction.build_summary_request(
            model=self.settings.compaction_model,
            previous_summary=h.summary,
            messages=folded,
            provider=self.settings.provider,
        )
        self._check_stop()
        try:
            response = await self._cancellable(
                self.gateway.complete(request, api_key=self.settings.api_key, sink=None, meter=self.io.meter)
            )
        except GatewayError as exc:
            logger.warning("compaction failed, going on uncompacted: %s", exc.message)
            return False
        summary = response.text.strip()
        if not summary:
            logger.warning("compaction returned no summary, going on uncompacted")
            COMPACTIONS_EMPTY.inc()
            return False
        h.summary, h.summary_up_to = summary, cut
        h.reported_tokens, h.reported_seq = 0, 0
        drafts = await self.io.save_summary(summary, cut, estimate)
        COMPACTIONS.inc()
        await self.io.emit(frames.compacted(up_to=cut, estimated_tokens=estimate, drafts=drafts))
        return True
