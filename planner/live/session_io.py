"""The durable side of one live turn: what the loop reads and writes, through the database threads.

The loop (``planner/agent/loop.py``) knows nothing of Django; :class:`SessionIO`
gives it the session's inputs (steering, change notes), saves each step in
one transaction, runs tools, and publishes frames through the hub. Usage and
tool-call records wait for the next step's transaction. A round of tool calls
is one trip to the database threads; when its calls only read, the answer and
their results are stored together, after the calls ran (a process that dies
meanwhile leaves the history as it was), else the answer first.

What the tools act with (the session's owner and project, the readers of a question's sub-chat) is
loaded on the database threads by the turn's first round of tool calls and stays there: the event
loop holds the turn's ids, never a model (docs/architecture.md#one-bridge).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from django.utils import timezone

from planner.agent import frames
from planner.agent.calls import CallRecord, Gateway, GatewayError, Meter, StreamSink
from planner.agent.frames import Frame, RequestFrame
from planner.agent.loop import ToolRound, ToolRun, TurnIO
from planner.agent.messages import (
    ChatMessage,
    ModelRequest,
    ModelResponse,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from planner.domain.selectors import TurnSetup, session_tool_context, tokens_used_since, utc_day_start
from planner.domain.services import human_requests, sessions, subchats
from planner.domain.tools import TOOLS, ToolContext
from planner.domain.tools.base import ToolOutcome, error_output, reads_ahead
from planner.ground.bridge import db, off_the_loop
from planner.ground.turns import LiveTurn
from planner.models import RequestKind
from tracker.db import sql
from tracker.inputs import nul_paths
from tracker.trust.permissions import access_query, access_scope

Emit = Callable[[Frame], Awaitable[None]]


@dataclass(frozen=True)
class _RoundDone:
    answer: ChatMessage
    runs: list[ToolRun]
    results: ChatMessage | None
    last: sessions.Saved  # the round's last save: where the session stands
    error: Exception | None = None
    paused: list[RequestFrame] | None = None  # the turn paused on these requests


def _invalid(call: ToolUseBlock) -> bool:
    """Would the call be refused for its input alone (so no human need see it)?"""
    spec = TOOLS.get(call.name)
    if spec is None or not isinstance(call.input, dict) or nul_paths(call.input):
        return True
    return any(spec.validator().iter_errors(call.input))


def _results(runs: list[ToolRun]) -> ChatMessage:
    """The message that answers a round's calls with what they returned."""
    return ChatMessage(role="user", content=tuple(run.result for run in runs), kind="tool_results")


class SessionIO(TurnIO):
    """The loop's durable side, for one live turn."""

    def __init__(self, live: LiveTurn, setup: TurnSetup, emit: Emit) -> None:
        self.live = live
        self.setup = setup
        self._emit = emit
        self.focus = set(setup.focus)  # what the session follows: the tools add to it
        self._context: ToolContext | None = None  # on the database threads only: see context()
        self.records = sessions.StepRecords(project_id=setup.project_id)
        self.last_seq = setup.last_seq  # each save checks that nothing was stored since
        self.ended = False  # the last answer's save ended the turn

    async def inputs(self) -> list[ChatMessage]:
        if not self.live.inputs_waiting:
            return []
        self.live.inputs_waiting = self.live.steering_waiting = False
        delivered = await db(sessions.session_inputs)(
            session_id=self.live.session_id, turn=self.live.turn, focus=sorted(self.focus)
        )
        for message, author in delivered:
            self.last_seq = message.seq
            if message.kind == "steer":
                await self.emit(
                    frames.user_message(seq=message.seq, text=message.text, author=author, kind="steer")
                )
        return [message for message, _ in delivered]

    async def has_inputs(self) -> bool:
        # Each save says whether steering waits, and steering from this process sets it; steering
        # that slips in after the last save is caught by ``turn_end`` ("steered").
        return not self.ended and self.live.steering_waiting

    async def save_assistant(self, message: ChatMessage, usage: Usage, *, last: bool = False) -> ChatMessage:
        return await self._save(message, usage=usage, last=last)

    async def tool_round(
        self, answer: ChatMessage, usage: Usage, calls: list[ToolUseBlock], stopping: Callable[[], bool]
    ) -> ToolRound:
        done = await db(self._tool_round)(answer, usage, calls, stopping)
        self._saved(done.last)
        return ToolRound(
            answer=done.answer, runs=done.runs, results=done.results, error=done.error, paused=done.paused
        )

    def context(self) -> ToolContext:
        """What the turn's tools act with, loaded by its first round of calls (a database thread's
        call: it holds the session's owner and project)."""
        if self._context is None:
            off_the_loop()
            self._context = session_tool_context(
                session_id=self.live.session_id, turn=self.live.turn, focus=self.focus
            )
        return self._context

    def _tool_round(
        self, answer: ChatMessage, usage: Usage, calls: list[ToolUseBlock], stopping: Callable[[], bool]
    ) -> _RoundDone:
        """On a database thread: store the answer, run its calls, store their results."""
        asks = [(c, k) for c in calls if (k := human_requests.human_kind(c, self.setup.approve_tools))]
        if asks:
            return self._pausing_round(answer, usage, calls, stopping, asks)
        if any(spec.writes for call in calls if (spec := TOOLS.get(call.name)) is not None):
            return self._writing_round(answer, usage, calls, stopping)
        try:
            runs = self._calls(calls, stopping, ahead=True)
            if len(runs) < len(calls):  # stopped: the answer alone, the loop answers the rest
                saved = self._store(answer, after_seq=self.last_seq, usage=usage)
                return _RoundDone(saved.message, runs, None, saved)
            saved = self._store(
                answer,
                after_seq=self.last_seq,
                usage=usage,
                then=_results(runs),
                focus=sorted(self.focus),
            )
        except Exception:
            self.records.tools.clear()  # calls that only read, of an answer never stored
            raise
        return _RoundDone(saved.messages[0], runs, saved.messages[1], saved)

    def _writing_round(
        self, answer: ChatMessage, usage: Usage, calls: list[ToolUseBlock], stopping: Callable[[], bool]
    ) -> _RoundDone:
        """A round with a call that writes: the answer is stored before any call runs, so what a
        call changes is never without the answer that asked for it."""
        saved = self._store(answer, after_seq=self.last_seq, usage=usage)
        runs: list[ToolRun] = []
        try:
            runs = self._calls(calls, stopping)
            if len(runs) < len(calls):
                return _RoundDone(saved.message, runs, None, saved)
            stored = self._store(_results(runs), after_seq=saved.message.seq, focus=sorted(self.focus))
        except Exception as exc:  # the answer is stored: the loop must know, then fail the turn
            return _RoundDone(saved.message, runs, None, saved, exc)
        return _RoundDone(saved.message, runs, stored.message, stored)

    def _pausing_round(
        self,
        answer: ChatMessage,
        usage: Usage,
        calls: list[ToolUseBlock],
        stopping: Callable[[], bool],
        asks: list[tuple[ToolUseBlock, RequestKind]],
    ) -> _RoundDone:
        """A round with calls that wait for a human or a sub-chat: the answer is stored, the other
        calls run, and the turn pauses on a request per waiting call
        (``planner/domain/services/human_requests.py``). A waiting call whose input is invalid is
        answered at once with the error, like any call, and so is a ``start_subchat`` call refused
        before it waits (``subchats.subchat_refusals``)."""
        waiting = {call.id for call, _ in asks if not _invalid(call)}
        starts = [call for call, kind in asks if kind == RequestKind.SUBCHAT and call.id in waiting]
        refused = subchats.subchat_refusals(session_id=self.live.session_id, calls=starts) if starts else {}
        waiting -= refused.keys()
        asks = [(call, kind) for call, kind in asks if call.id in waiting]
        saved = self._store(answer, after_seq=self.last_seq, usage=usage)
        runs: list[ToolRun] = []
        try:
            to_run = [c for c in calls if c.id not in waiting and c.id not in refused]
            runs = self._calls(to_run, stopping)
            if len(runs) < len(to_run):
                return _RoundDone(saved.message, runs, None, saved)
            if refused:
                order = {call.id: index for index, call in enumerate(calls)}
                runs += [self._refused(c, *refused[c.id]) for c in calls if c.id in refused]
                runs.sort(key=lambda run: order[run.result.tool_use_id])
            if not asks:  # every waiting call was refused: an ordinary round
                stored = self._store(_results(runs), after_seq=saved.message.seq, focus=sorted(self.focus))
                return _RoundDone(saved.message, runs, stored.message, stored)
            paused = human_requests.turn_pause(
                session_id=self.live.session_id,
                turn=self.live.turn,
                after_seq=saved.message.seq,
                asks=asks,
                records=self.records,
                focus=sorted(self.focus),
                project=self.context().project,
            )
        except Exception as exc:
            return _RoundDone(saved.message, runs, None, saved, exc)
        frames_out = [human_requests.request_frame(r) for r in paused]
        return _RoundDone(saved.message, runs, None, saved, paused=frames_out)

    def _calls(
        self, calls: list[ToolUseBlock], stopping: Callable[[], bool], *, ahead: bool = False
    ) -> list[ToolRun]:
        """Run ``calls`` in order until ``stopping()``; the human's access is read once for them.
        ``ahead``: none of them writes, so the access and what each reads first are read at once,
        one round trip (docs/architecture.md#the-hot-path-in-sql)."""
        runs: list[ToolRun] = []
        with access_scope(), sql.reading_ahead(self._reads(calls) if ahead else []):
            for call in calls:
                if stopping():
                    break
                runs.append(self._run(call))
        return runs

    def _reads(self, calls: list[ToolUseBlock]) -> list[sql.Statement]:
        """The access of whom the tools read for, and what each call reads first."""
        context = self.context()
        users = context.shared.users if context.shared is not None else (context.user,)
        reads = [access_query([user.pk]) for user in users]
        for call in calls:
            reads.extend(reads_ahead(TOOLS.get(call.name), call.input, self.context()))
        return reads

    def _refused(self, call: ToolUseBlock, code: str, message: str) -> ToolRun:
        """A call answered with an error before it ran, recorded like one that ran."""
        context = self.context()
        outcome = ToolOutcome(error_output(code, message), True)
        self.records.tools.append(
            sessions.ToolRecord(
                call=call,
                outcome=outcome,
                duration_ms=0.0,
                actor=context.actor.label,
                user_id=context.user.pk,
            )
        )
        return ToolRun(result=ToolResultBlock(call.id, outcome.content, is_error=True), output=outcome.output)

    def _run(self, call: ToolUseBlock) -> ToolRun:
        context = self.context()
        record = sessions.tool_run(context=context, call=call)
        self.records.tools.append(record)
        outcome = record.outcome
        drafts = tuple(
            frames.draft(kind=d.kind, snapshot=d.snapshot, artifact_id=d.artifact_id) for d in context.drafts
        )
        context.drafts.clear()
        return ToolRun(
            result=ToolResultBlock(call.id, outcome.content, is_error=outcome.is_error),
            output=outcome.output,
            drafts=drafts,
        )

    async def save_results(self, message: ChatMessage) -> ChatMessage:
        return await self._save(message, focus=sorted(self.focus))

    async def _save(
        self,
        message: ChatMessage,
        *,
        usage: Usage | None = None,
        focus: list[str] | None = None,
        last: bool = False,
    ) -> ChatMessage:
        saved = await db(self._store)(message, after_seq=self.last_seq, usage=usage, focus=focus, last=last)
        self._saved(saved)
        return saved.message

    def _store(
        self,
        message: ChatMessage,
        *,
        after_seq: int,
        usage: Usage | None = None,
        focus: list[str] | None = None,
        last: bool = False,
        then: ChatMessage | None = None,
    ) -> sessions.Saved:
        return sessions.message_save(
            session_id=self.live.session_id,
            turn=self.live.turn,
            after_seq=after_seq,
            message=message,
            usage=usage,
            focus=focus,
            records=self.records,
            last=last,
            then=then,
            question_id=self.setup.question_id,
        )

    def _saved(self, saved: sessions.Saved) -> None:
        self.last_seq = saved.message.seq
        self.ended = saved.ended
        self.live.inputs_waiting = self.live.inputs_waiting or saved.inputs_waiting
        self.live.steering_waiting = self.live.steering_waiting or saved.steering_waiting

    async def save_summary(self, summary: str, up_to: int, estimated_tokens: int) -> int:
        return await db(sessions.summary_save)(
            session_id=self.live.session_id,
            turn=self.live.turn,
            summary=summary,
            up_to=up_to,
            estimated_tokens=estimated_tokens,
        )

    async def emit(self, frame: Frame) -> None:
        await self._emit(frame)

    async def meter(self, record: CallRecord) -> None:
        if record.outcome == "ok":
            self.records.usage.append(record)  # stored with the answer it produced
            return
        await db(sessions.usage_save)(
            project_id=self.setup.project_id, session_id=self.live.session_id, record=record
        )


class BudgetedGateway:
    """The gateway of one turn, closed once the project's daily token budget is used up (docs/trust.md).

    Before every model call of the turn (its rounds and compaction) it counts every token the
    provider processed for the project in the UTC day, cached input included: the stored usage
    records, and this turn's calls whose records still wait for the next step's transaction. A
    refused call is never made; the loop ends the turn ``failed`` with the message, leaving a
    valid history.
    """

    def __init__(self, inner: Gateway, io: SessionIO, budget: int) -> None:
        self.inner = inner
        self.io = io
        self.budget = budget

    async def complete(
        self, request: ModelRequest, *, api_key: str | None, sink: StreamSink | None, meter: Meter
    ) -> ModelResponse:
        since = utc_day_start(timezone.now())
        stored = await db(tokens_used_since)(project_id=self.io.setup.project_id, since=since)
        pending = sum(r.usage.context_tokens for r in self.io.records.usage)
        if stored + pending >= self.budget:
            raise GatewayError(
                "token_budget",
                f"The project's daily token budget of {self.budget:,} tokens is used up; "
                "it resets at 00:00 UTC.",
            )
        return await self.inner.complete(request, api_key=api_key, sink=sink, meter=meter)


def budgeted(gateway: Gateway, io: SessionIO) -> Gateway:
    """``gateway`` within the project's daily token budget, if it has one: the demo planner
    processes no tokens, so it answers whatever the budget (docs/architecture.md#the-demo-planner)."""
    budget = io.setup.token_budget
    if budget is None or io.setup.settings.provider == "demo":
        return gateway
    return BudgetedGateway(gateway, io, budget)
