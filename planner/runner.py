"""The runner: send / stop / watch, the only place where the ORM, the loop and live frames meet.

A message gets one meaning on every surface (REST, WebSocket): to an idle
session it starts a turn, to a running one it steers the turn (delivered at
the model's next call, from any process), to a paused one it continues the
turn. Turns are asyncio tasks in the process that started them; ``stop``
and ``watch`` reach them through the channel layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
import threading
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import SyncToAsync
from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError, close_old_connections, connections
from django.utils import timezone

from planner import events, frames, guard, presence, services
from planner.frames import Frame
from planner.gateway import AnthropicGateway, CallRecord, Gateway, GatewayError, Meter, StreamSink
from planner.loop import ToolRun, TurnIO, TurnLoop, TurnOutcome
from planner.messages import ChatMessage, ModelRequest, ModelResponse, ToolResultBlock, ToolUseBlock, Usage
from planner.metrics import TURNS
from planner.process import HEARTBEAT_SECONDS, LOCAL_TURNS, PROCESS_ID, running_here
from planner.relay import Inbox, Relay
from planner.selectors import TurnSetup, session_get, tokens_used_since, utc_day_start
from planner.services import Begin
from planner.tools import ToolContext
from tracker.errors import NotFoundError
from tracker.selectors import project_planner_config

logger = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")

# Turns outlive the request or connection that started them, so their database work runs
# on the runner's own threads, never on a request's thread-sensitive executor. SQLite
# takes one writer at a time; PostgreSQL gets a few connections.
_DB_THREADS = ThreadPoolExecutor(
    max_workers=8 if settings.PRODUCTION_MODE else 1,
    thread_name_prefix="planner-db",
)


_checked = threading.local()
CONNECTION_CHECK_SECONDS = 10.0


class _RunnerSyncToAsync(SyncToAsync):
    """Like channels' ``DatabaseSyncToAsync``, but checks the thread's connections every few
    seconds instead of around every call (a health check is a round trip per step)."""

    def thread_handler(self, loop: Any, *args: Any, **kwargs: Any) -> Any:
        now = time.monotonic()
        if now - getattr(_checked, "at", 0.0) > CONNECTION_CHECK_SECONDS:
            close_old_connections()
            _checked.at = now
        try:
            return super().thread_handler(loop, *args, **kwargs)
        except DatabaseError:
            close_old_connections()  # a broken connection is replaced at the next call
            _checked.at = 0.0
            raise


def db(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``func`` run on the runner's database threads."""
    wrapped: Callable[P, Awaitable[R]] = _RunnerSyncToAsync(
        func, thread_sensitive=False, executor=_DB_THREADS
    )
    return wrapped


def close_db_connections() -> None:
    """Close the connections of every runner thread (tests tearing down their database)."""
    workers = _DB_THREADS._max_workers
    barrier = threading.Barrier(workers, timeout=5)

    def close() -> None:
        connections.close_all()
        _checked.at = 0.0
        barrier.wait()

    for future in [_DB_THREADS.submit(close) for _ in range(workers)]:
        future.result()


MAX_RESTARTS = 5
_frame_numbers = itertools.count(1)


MAX_BATCH = 256
PUBLISH_ATTEMPTS = 5
PUBLISH_RETRY_SECONDS = 0.05


@dataclass
class LiveTurn:
    """A turn running in this process, and the frames it sent so far (for late watchers).

    While another process watches the session, frames also leave through ``outbox``,
    in order, drained by one sender task: the turn never waits on the channel layer,
    and a backlog goes out as one message.
    """

    session_id: uuid.UUID
    turn: int
    loop: TurnLoop | None = None
    task: asyncio.Task[None] | None = None
    frames: list[Frame] = field(default_factory=list)
    outbox: asyncio.Queue[Frame | None] = field(default_factory=asyncio.Queue)
    sender: asyncio.Task[None] | None = None
    io: _SessionIO | None = None
    stop_requested: bool = False
    watched_elsewhere: bool = False

    def stop(self) -> None:
        """Stop the turn, also if its loop is still being set up."""
        self.stop_requested = True
        if self.loop is not None:
            self.loop.stop()

    def remember(self, frame: Frame) -> None:
        self.frames[-1:] = frames.coalesced([*self.frames[-1:], frame])


REMOTE_CHECK_SECONDS = 2.0


class _Seen:
    """Which frames a watcher already has: the highest number per sending process."""

    def __init__(self) -> None:
        self.highest: dict[str, int] = {}

    def fresh(self, batch: list[Frame]) -> list[Frame]:
        out = []
        for frame in batch:
            origin, number = frame.get("origin", ""), frame.get("n", 0)
            if number and number <= self.highest.get(origin, 0):
                continue
            if number:
                self.highest[origin] = number
            out.append(frame)
        return out


class _SessionIO(TurnIO):
    """The loop's durable side, for one live turn."""

    def __init__(self, runner: Runner, live: LiveTurn, setup: TurnSetup) -> None:
        self.runner = runner
        self.live = live
        self.setup = setup
        self.context = ToolContext(
            user=setup.user, project=setup.project, session_id=live.session_id, focus=set(setup.focus)
        )
        # Usage and tool-call records wait for the next step's transaction.
        self.records = services.StepRecords(project_id=setup.project.pk)
        self.last_seq = setup.history.messages[-1].seq if setup.history.messages else 0
        # Whether steering or change notes may wait: each save says; a local steer sets it.
        self.inputs_waiting = True

    async def inputs(self) -> list[ChatMessage]:
        if not self.inputs_waiting:
            return []
        self.inputs_waiting = False
        delivered = await db(services.session_inputs)(
            session_id=self.live.session_id, turn=self.live.turn, focus=sorted(self.context.focus)
        )
        for message, author in delivered:
            self.last_seq = message.seq
            if message.kind == "steer":
                await self.emit(
                    frames.user_message(seq=message.seq, text=message.text, author=author, kind="steer")
                )
        return [message for message, _ in delivered]

    async def has_inputs(self) -> bool:
        result: bool = await db(services.session_has_steering)(session_id=self.live.session_id)
        return result

    async def save_assistant(self, message: ChatMessage, usage: Usage) -> ChatMessage:
        return await self._save(message, usage=usage)

    async def run_tool(self, call: ToolUseBlock) -> ToolRun:
        record = await db(services.tool_run)(context=self.context, call=call)
        self.records.tools.append(record)
        outcome = record.outcome
        drafts = tuple(
            frames.draft(kind=d.kind, snapshot=d.snapshot, artifact_id=d.artifact_id)
            for d in self.context.drafts
        )
        self.context.drafts.clear()
        return ToolRun(
            result=ToolResultBlock(call.id, outcome.content, is_error=outcome.is_error),
            output=outcome.output,
            drafts=drafts,
        )

    async def save_results(self, message: ChatMessage) -> ChatMessage:
        return await self._save(message, focus=sorted(self.context.focus))

    async def _save(
        self, message: ChatMessage, *, usage: Usage | None = None, focus: list[str] | None = None
    ) -> ChatMessage:
        saved = await db(services.message_save)(
            session_id=self.live.session_id,
            turn=self.live.turn,
            after_seq=self.last_seq,
            message=message,
            usage=usage,
            focus=focus,
            records=self.records,
        )
        self.last_seq = saved.message.seq
        self.inputs_waiting = self.inputs_waiting or saved.inputs_waiting
        return saved.message

    async def save_summary(self, summary: str, up_to: int, estimated_tokens: int) -> None:
        await db(services.summary_save)(
            session_id=self.live.session_id,
            turn=self.live.turn,
            summary=summary,
            up_to=up_to,
            estimated_tokens=estimated_tokens,
        )

    async def emit(self, frame: Frame) -> None:
        await self.runner.emit(self.live, frame)

    async def meter(self, record: CallRecord) -> None:
        if record.outcome == "ok":
            self.records.usage.append(record)  # stored with the answer it produced
            return
        await db(services.usage_save)(
            project_id=self.setup.project.pk, session_id=self.live.session_id, record=record
        )


class _BudgetedGateway:
    """The gateway of one turn, closed once the project's daily token budget is used up (SPEC § 12.4).

    Before every model call of the turn (its rounds and compaction) it counts the project's
    input + output tokens of the UTC day: the stored usage records, and this turn's calls
    whose records still wait for the next step's transaction. A refused call is never made;
    the loop ends the turn ``failed`` with the message, leaving a valid history.
    """

    def __init__(self, inner: Gateway, io: _SessionIO, budget: int) -> None:
        self.inner = inner
        self.io = io
        self.budget = budget

    async def complete(
        self, request: ModelRequest, *, api_key: str | None, sink: StreamSink | None, meter: Meter
    ) -> ModelResponse:
        since = utc_day_start(timezone.now())
        stored = await db(tokens_used_since)(project_id=self.io.setup.project.pk, since=since)
        pending = sum(r.usage.input_tokens + r.usage.output_tokens for r in self.io.records.usage)
        if stored + pending >= self.budget:
            raise GatewayError(
                "token_budget",
                f"The project's daily token budget of {self.budget:,} tokens is used up; "
                "it resets at 00:00 UTC.",
            )
        return await self.inner.complete(request, api_key=api_key, sink=sink, meter=meter)


def _budgeted(gateway: Gateway, io: _SessionIO) -> Gateway:
    budget = project_planner_config(io.setup.project).daily_token_budget
    return gateway if budget is None else _BudgetedGateway(gateway, io, budget)


class Runner:
    def __init__(self, gateway: Gateway | None = None) -> None:
        self._gateway = gateway
        self.live: dict[uuid.UUID, LiveTurn] = {}
        # Inboxes of this process's watchers, by session: local turns deliver to them directly.
        self.watchers: dict[uuid.UUID, set[Inbox]] = {}
        # Production mode: turns and watchers in other processes, over the channel layer.
        self.relay = Relay(deliver=self._deliver, control=self._control)
        self._heartbeat_task: asyncio.Task[None] | None = None

    @property
    def gateway(self) -> Gateway:
        if self._gateway is None:
            self._gateway = AnthropicGateway(base_url=settings.SERVER.anthropic_base_url)
        return self._gateway

    @gateway.setter
    def gateway(self, value: Gateway | None) -> None:
        self._gateway = value

    async def send(self, *, session_id: uuid.UUID, user: User, text: str) -> Begin:
        """Give ``text`` its meaning in the session (start, steer or continue)."""
        text = services.check_text(text)
        await presence.announce()  # before this process may own a turn
        here_already = session_id in LOCAL_TURNS
        LOCAL_TURNS.add(session_id)  # before the commit, so nobody takes the new turn for dead
        try:
            begin: Begin = await db(services.session_begin)(session_id=session_id, user=user, text=text)
        except BaseException:
            if not here_already:
                LOCAL_TURNS.discard(session_id)
            raise
        if begin.meaning == "steered":
            if not here_already:
                LOCAL_TURNS.discard(session_id)
            live = self.live.get(session_id)
            if live is not None and live.io is not None:
                live.io.inputs_waiting = True  # deliver at the very next model call
            return begin
        assert begin.message is not None
        live = LiveTurn(session_id=session_id, turn=begin.turn)
        if settings.PRODUCTION_MODE:  # only other processes need the channel layer
            live.sender = asyncio.get_running_loop().create_task(
                self._send_frames(live), context=contextvars.Context()
            )
        self.live[session_id] = live
        if settings.PRODUCTION_MODE:  # a replay asked for meanwhile may have said so already
            elsewhere = await presence.watched_elsewhere(session_id)
            live.watched_elsewhere = live.watched_elsewhere or elsewhere
        kind = "continue" if begin.meaning == "continued" else "human"
        await self.emit(
            live, frames.user_message(seq=begin.message.seq, text=text, author=user.get_username(), kind=kind)
        )
        # A fresh context: the turn outlives the request or connection that started it.
        live.task = asyncio.get_running_loop().create_task(
            self._drive(live, continued=begin.meaning == "continued"), context=contextvars.Context()
        )
        return begin

    async def stop(self, *, session_id: uuid.UUID, user: User) -> bool:
        """Stop the session's turn wherever it runs; False if none runs. Only its owner may."""
        session = await db(session_get)(user=user, session_id=session_id)
        if session.user_id != user.pk:
            raise NotFoundError("Session not found.")
        live = self.live.get(session_id)
        if live is not None:
            live.stop()
            return True
        if session.state == "running":
            await events.send_control(session_id, "stop")
            return True
        return False

    async def wait(self, session_id: uuid.UUID) -> None:
        """Wait for the session's local turn to end (tests, shutdown)."""
        live = self.live.get(session_id)
        if live is not None and live.task is not None:
            await asyncio.shield(live.task)

    async def watch(self, *, session_id: uuid.UUID, user: User) -> AsyncGenerator[Frame, None]:
        """The session's frames: ``state``, the current turn's frames so far, then live ones.

        Frames of a turn in this process reach the watcher directly. In
        production mode the process's relay also brings the frames of turns in
        other processes, and asks such a turn for its frames so far.
        """
        session = await db(session_get)(user=user, session_id=session_id)
        # Joining and taking a local turn's frames so far happen at once, so they come first.
        live = self.live.get(session_id)
        inbox = Inbox(live.frames if live is not None else None)
        self.watchers.setdefault(session_id, set()).add(inbox)
        relay = self.relay if settings.PRODUCTION_MODE else None
        try:
            if relay is not None:
                await relay.watch(session_id)
            yield frames.state(
                session_state=session.state, last_seq=session.last_message_seq, turn=session.turn_count
            )
            if live is None and relay is not None and session.state == "running":
                inbox.put_first(await relay.replay(session_id))
            seen = _Seen()
            while True:
                # Everything waiting, with runs of text deltas joined: a watcher behind a busy
                # server catches up in a few frames instead of one per delta.
                for frame in frames.coalesced(seen.fresh(await inbox.take())):
                    yield frame
        finally:
            watchers = self.watchers[session_id]
            watchers.discard(inbox)
            if not watchers:
                del self.watchers[session_id]
            if relay is not None:
                await relay.unwatch(session_id)

    def _deliver(self, session_id: uuid.UUID, batch: list[Frame]) -> None:
        """Frames of a turn in another process, to this process's watchers of the session."""
        for inbox in self.watchers.get(session_id, ()):
            inbox.put(batch)

    def _control(self, session_id: uuid.UUID, message: dict[str, Any]) -> Awaitable[None] | None:
        """A control message for a turn here: stop it, or replay its frames to another process."""
        live = self.live.get(session_id)
        if live is None:
            return None
        command = message.get("command")
        if command == "stop":
            live.stop()
        elif command == "replay" and message.get("reply_to"):
            live.watched_elsewhere = True  # publish from now on, without waiting for a check
            return self.relay.answer_replay(message, list(live.frames))
        return None

    async def emit(self, live: LiveTurn, frame: Frame) -> None:
        numbered = {**frame, "n": next(_frame_numbers), "origin": PROCESS_ID}
        live.remember(numbered)
        for inbox in self.watchers.get(live.session_id, ()):
            inbox.put([numbered])
        if live.watched_elsewhere:
            live.outbox.put_nowait(numbered)  # for watchers in other processes

    async def _send_frames(self, live: LiveTurn) -> None:
        """Publish the outbox in order until its closing ``None``.

        Frames enter the outbox only while another process watches the session
        (``emit`` checks); until then this task looks for such a watcher every
        ``REMOTE_CHECK_SECONDS``. A watcher elsewhere that arrives mid-turn asks
        for a replay, which turns publishing on at once.
        """
        while True:
            if live.watched_elsewhere:
                first = await live.outbox.get()
            else:
                try:
                    first = await asyncio.wait_for(live.outbox.get(), REMOTE_CHECK_SECONDS)
                except TimeoutError:
                    live.watched_elsewhere = await presence.watched_elsewhere(live.session_id)
                    continue
            batch = [first]
            while len(batch) < MAX_BATCH and not live.outbox.empty():
                batch.append(live.outbox.get_nowait())
            frames_out = [f for f in batch if f is not None]
            if frames_out:
                await self._publish(live, frames_out)
            if batch[-1] is None:
                return

    async def _publish(self, live: LiveTurn, batch: list[Frame]) -> None:
        """Publish ``batch``, retrying a failing channel layer (a busy Redis pool) before giving up."""
        for attempt in range(PUBLISH_ATTEMPTS):
            try:
                await events.publish(live.session_id, batch)
                return
            except Exception:
                if attempt == PUBLISH_ATTEMPTS - 1:
                    logger.exception("could not publish frames of session %s", live.session_id)
                    return
                await asyncio.sleep(PUBLISH_RETRY_SECONDS * 2**attempt)

    async def _drive(self, live: LiveTurn, *, continued: bool) -> None:
        outcome = TurnOutcome("failed", "The turn could not start.")
        if settings.PRODUCTION_MODE:
            await self._serve(live.session_id, True)
        if not running_here(self._heartbeat_task):
            self._heartbeat_task = asyncio.get_running_loop().create_task(
                self._heartbeat(), context=contextvars.Context()
            )
        try:
            outcome = await self._run(live, continued=continued)
        except Exception:
            logger.exception("planner turn of session %s crashed", live.session_id)
            outcome = TurnOutcome("failed", "Ballet hit an internal error running this turn; it was logged.")
            await db(services.turn_end)(
                session_id=live.session_id, turn=live.turn, reason="failed", error=outcome.error
            )
        finally:
            if settings.PRODUCTION_MODE:
                await self._serve(live.session_id, False)
            TURNS.labels(outcome.reason).inc()
            with contextlib.suppress(Exception):
                await self.emit(live, frames.turn_ended(reason=outcome.reason, error=outcome.error))
            live.outbox.put_nowait(None)
            if live.sender is not None:
                await asyncio.shield(live.sender)
            self.live.pop(live.session_id, None)
            LOCAL_TURNS.discard(live.session_id)

    async def _run(self, live: LiveTurn, *, continued: bool) -> TurnOutcome:
        setup: TurnSetup = await db(services.turn_open)(
            session_id=live.session_id, turn=live.turn, continued=continued
        )
        await self.emit(live, frames.turn_started(turn=live.turn, continued=continued))
        io = live.io = _SessionIO(self, live, setup)
        live.loop = TurnLoop(
            io=io, gateway=_budgeted(self.gateway, io), settings=setup.settings, history=setup.history
        )
        if live.stop_requested:
            live.loop.stop()
        # A human who loses planner.chat while the turn runs stops it (planner/guard.py).
        grant = guard.Grant(setup.user.pk, setup.project.pk, None, lambda _code: live.stop())
        guard.hold(grant)
        try:
            return await self._rounds(live, io)
        finally:
            guard.release(grant)

    async def _rounds(self, live: LiveTurn, io: _SessionIO) -> TurnOutcome:
        assert live.loop is not None
        outcome = TurnOutcome("completed")
        for _ in range(MAX_RESTARTS):
            outcome = await live.loop.run()
            ended = await db(services.turn_end)(
                session_id=live.session_id,
                turn=live.turn,
                reason=outcome.reason,
                error=outcome.error,
                records=io.records,
            )
            if ended:
                return outcome
        await db(services.turn_end)(
            session_id=live.session_id, turn=live.turn, reason="completed", error=None, records=io.records
        )
        return outcome

    async def _serve(self, session_id: uuid.UUID, serving: bool) -> None:
        """Take (or stop taking) the control messages of a local turn: ``stop`` and ``replay``
        from other processes. A failing channel layer leaves the turn stoppable only here."""
        try:
            if serving:
                await self.relay.serve(session_id)
            else:
                await self.relay.unserve(session_id)
        except Exception:
            logger.exception(
                "could not %s the control group of session %s", "join" if serving else "leave", session_id
            )

    async def _heartbeat(self) -> None:
        """Beat for all of this process's turns at once while any runs (one statement, not one
        per turn: hundreds of turns that started together would otherwise beat together)."""
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            sessions = list(self.live)
            if not sessions:
                return
            try:
                await db(services.heartbeat)(session_ids=sessions, owner=PROCESS_ID)
            except Exception:
                logger.exception("the heartbeat of %d turns failed", len(sessions))


runner = Runner()
