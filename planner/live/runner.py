"""The runner: send, retract, stop and watch — where a message, its turn and its watchers meet.

A message gets one meaning on every surface (REST, WebSocket): to an idle
session it starts a turn, to a running one it steers the turn (delivered at
the model's next call, from any process), to a paused one it continues the
turn. Turns are asyncio tasks of the process that started them.

The runner holds no state of its own but its gateway: the turns, the watchers
and the links to other processes are the hub's (``hub.py``). The path of one
message, module by module, is told in ``docs/architecture.md``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any, Protocol, TypeVar

from django.conf import settings
from django.contrib.auth.models import User

from planner.agent import frames
from planner.agent.calls import Gateway
from planner.agent.demo import DemoGateway
from planner.agent.frames import Frame
from planner.agent.providers import AnthropicOnDemand, ProviderGateway
from planner.domain.selectors import SessionView, TurnSetup, session_view, work_waiting
from planner.domain.services import agent_questions, human_requests, question_turns, sessions
from planner.domain.services.agent_questions import WaitingQuestion
from planner.domain.services.human_requests import Resolution
from planner.domain.services.reuse_judge import JudgeCall
from planner.domain.services.sessions import Begin, TurnsFullError, resend
from planner.domain.services.sessions.resend import Redone
from planner.domain.services.subchat_waits import PROCESS_DIED
from planner.ground.bridge import db
from planner.ground.turns import LiveTurn
from planner.live import reuse_judging, starts, subchats, titles, turn, waiting
from planner.live.hub import Hub, Opening, hub
from planner.live.inbox import Seen
from planner.models import SessionState
from tracker.errors import BalletError, NotFoundError, UnavailableError

logger = logging.getLogger(__name__)


class Starting(Protocol):
    """What recording a question returns: the question to start, if any, or the reuse judge's call
    to make before anything is recorded (``Asked``)."""

    @property
    def start(self) -> WaitingQuestion | None: ...

    @property
    def judge(self) -> JudgeCall | None: ...


A = TypeVar("A", bound=Starting)


class Runner:
    def __init__(self, gateway: Gateway | None = None, *, on: Hub = hub) -> None:
        self._gateway = gateway
        self.hub = on

    @property
    def gateway(self) -> Gateway:
        if self._gateway is None:
            self._gateway = ProviderGateway(
                anthropic=AnthropicOnDemand(base_url=settings.SERVER.anthropic_base_url), demo=DemoGateway()
            )
        return self._gateway

    @gateway.setter
    def gateway(self, value: Gateway | None) -> None:
        self._gateway = value

    # ------------------------------------------------------------------ send, stop, watch

    async def send(
        self,
        *,
        session_id: uuid.UUID,
        user: User,
        text: str,
        question: bool = False,
        shown: str | None = None,
    ) -> Begin:
        """Give ``text`` its meaning in the session (start, steer or continue); watchers see
        ``shown`` instead when given (a question's first message: the question as asked, not how
        the model is told to answer it).

        A turn must be stoppable from every process, so its control messages are
        served before the message is accepted: with the channel layer down, the
        message is refused (503) and nothing is written.
        """
        text = sessions.check_text(text)
        begun = functools.partial(
            sessions.session_begin,
            session_id=session_id,
            user=user,
            text=text,
            question=question,
            reply=human_requests.requests_reply_all,
        )
        kind = "question" if question else "human"
        seen = text if shown is None else shown
        author = user.get_username()
        return await self.send_as(session_id, user.pk, begun, author=author, seen=seen, kind=kind)

    async def send_as(
        self,
        session_id: uuid.UUID,
        user_id: int,
        begun: Callable[[], Begin],
        *,
        author: str,
        seen: str,
        kind: str,
    ) -> Begin:
        """``begun`` (a service giving a message from ``user_id`` its meaning) on the database
        threads, then the turn it started or continued; watchers see the message as ``seen``. Also
        for a message the planner sends (a sub-chat's brief, ``subchats.py``)."""
        taken, live = await starts.slot(), None  # a few turns open at once (starts.py)
        try:
            begin, live = await self._beginning(session_id, user_id, begun)
            if live is None:
                steered = self.hub.turn_here(session_id)
                if steered is not None:
                    steered.steered()  # deliver at the very next model call
                return begin
            first = list(begin.frames)
            if begin.message is not None:
                shown_as = "continue" if begin.meaning == "continued" else kind
                first.insert(
                    0, frames.user_message(seq=begin.message.seq, text=seen, author=author, kind=shown_as)
                )
            await self._start(live, begin, first, taken)
            return begin
        finally:
            if live is None or live.task is None:  # no turn of its own gives it back
                taken.release()

    async def _beginning(
        self, session_id: uuid.UUID, user_id: int, begun: Callable[[], Begin]
    ) -> tuple[Begin, LiveTurn | None]:
        """``begun`` (a service giving a human's action its meaning) on the database threads,
        serving the session and claiming it here first; the turn it opened, registered here,
        unless it only steered the running one."""
        live = None
        async with self.hub.opening(session_id) as opening:
            begin: Begin = await db(begun)()
            if begin.recovered:
                await self.hub.publish(session_id, list(begin.recovered))
            if begin.meaning != "steered":
                # A reply resumed it: steering may wait.
                live = await opening.turn(turn=begin.turn, user_id=user_id, inputs_waiting=bool(begin.frames))
        return begin, live

    async def _start(
        self, live: LiveTurn, begin: Begin, first: list[Frame], taken: starts.Slot | None = None
    ) -> None:
        """Send ``first`` to the watchers, then run the turn ``begin`` opened, as a task of its own
        (which gives ``taken`` back as it calls the model)."""
        assert begin.setup is not None
        await self.hub.publish(live.session_id, first)
        # A fresh context: the turn outlives the request or connection that started it.
        live.task = asyncio.get_running_loop().create_task(
            self._drive(live, begin.setup, continued=begin.meaning == "continued", taken=taken),
            context=contextvars.Context(),
        )

    async def reply(
        self,
        *,
        session_id: uuid.UUID,
        user: User,
        request: Any,
        text: Any = None,
        approve: Any = None,
        reason: Any = None,
    ) -> Resolution:
        """Answer one pending request of the session (docs/domain.md); the turn resumes here
        once none is pending. Every watcher, in every process, hears of it."""
        answered = functools.partial(
            human_requests.request_reply,
            session_id=session_id,
            user=user,
            request_id=request,
            text=text,
            approve=approve,
            reason=reason,
        )
        resolution = await self.settle_requests(session_id, answered)
        assert resolution is not None  # request_reply raises rather than find nothing
        return resolution

    async def settle_requests(
        self, session_id: uuid.UUID, resolve: Callable[[], Resolution | None]
    ) -> Resolution | None:
        """``resolve`` (a human's answer, a sub-chat's end) settles requests of the session's
        paused turn; the turn resumes here once none is pending. Every watcher hears of it."""
        resolution, live = await self._resuming(session_id, resolve)
        if resolution is None:
            return None
        if live is None:
            await self.hub.publish(session_id, resolution.frames)
        else:
            assert resolution.begin is not None
            await self._start(live, resolution.begin, resolution.frames)
        if resolution.waiting is not None:
            self.hub.work_waiting = True
        return resolution

    async def _resume(self, session_id: uuid.UUID) -> TurnsFullError | bool:
        """Resume a turn whose answers waited for a free turn: True if it started here, False if
        it no longer waits (resumed elsewhere, stopped), the limit that still holds it else."""
        resumed = functools.partial(human_requests.turn_resume, session_id=session_id)
        resolution, live = await self._resuming(session_id, resumed)
        if resolution is None:
            return False
        if resolution.begin is None:
            assert resolution.held is not None  # answered, not resumed: a limit holds it
            return resolution.held
        assert live is not None
        await self._start(live, resolution.begin, resolution.frames)
        return True

    async def _resuming(
        self, session_id: uuid.UUID, resolve: Callable[[], Resolution | None]
    ) -> tuple[Resolution | None, LiveTurn | None]:
        """``resolve`` on the database threads, serving the session and claiming it here first, so
        that a turn it resumes is stoppable from every process and never taken for dead; the turn
        registered here, if it resumed one."""
        live = None
        async with self.hub.opening(session_id) as opening:
            resolution = await db(resolve)()
            if resolution is not None and resolution.begin is not None:
                live = await _resumed(opening, resolution.begin)
        return resolution, live

    async def stop(self, *, session_id: uuid.UUID, user: User) -> bool:
        """Stop the session's turn wherever it runs, and the sub-chats its planner started that
        still run (docs/domain.md#sub-chats); False if no turn of the session runs. Only its owner
        may.

        True means the turn ends ``stopped``: a stop that races an approval resuming the turn
        stops the resumed turn, here or in the process resuming it."""
        stopped = await self._stop_one(session_id, user)
        await subchats.stop_children(self, session_id, user)
        return stopped

    async def _stop_one(self, session_id: uuid.UUID, user: User) -> bool:
        live = self.hub.turn_here(session_id)
        if live is not None and live.user_id == user.pk:
            live.stop()  # at once: not behind the turn's own work on the database threads
            return True
        viewed = functools.partial(session_view, user=user, session_id=session_id)
        session = await db(viewed)()
        if session.user_id != user.pk:
            raise NotFoundError("Session not found.")
        cancel = functools.partial(human_requests.requests_cancel, session_id=session_id, user=user)
        return await self._stop(session, cancel, viewed)

    async def _stop(
        self,
        session: SessionView,
        cancel: Callable[[], list[Frame] | None],
        viewed: Callable[[], SessionView],
    ) -> bool:
        """Stop the turn of ``session`` that does not run here: ``cancel`` the requests it is paused
        on, or stop it in the process running it (recovered if that process died)."""
        session_id = session.id
        if session.state == SessionState.PAUSED:
            cancelled = await db(cancel)()
            if cancelled is not None:
                await self.hub.publish(session_id, cancelled)
                await subchats.ended(self, session_id)  # a sub-chat paused on a human, stopped
                return True
            session = await db(viewed)()  # resumed meanwhile?
        if self.hub.stop_here(session_id):
            return True
        if session.state != SessionState.RUNNING or await self.recover(session_id, answer=False):
            return False
        await self.hub.stop_elsewhere(session_id)
        return True

    async def retract(self, *, session_id: uuid.UUID, user: User) -> str:
        """Take back the owner's last steering message that the planner has not read yet; its
        text. Every watcher, in every process, drops its queued bubble (``steer_retracted``)."""
        text: str = await db(sessions.steering_retract)(session_id=session_id, user=user)
        await self.hub.publish(session_id, [frames.steer_retracted(text=text)])
        return text

    # ------------------------------------------------------------------ retry, edit

    async def retry(self, *, session_id: uuid.UUID, user: User) -> Redone:
        """Run the session's failed or stopped last turn again (``services/resend.py``): watchers
        hear what it superseded, then the new turn."""
        retried = functools.partial(resend.session_retry, session_id=session_id, user=user)
        return await self._redo(session_id, user, retried, text="")

    async def edit(self, *, session_id: uuid.UUID, user: User, seq: Any, text: Any) -> Redone:
        """Put ``text`` in place of the human's last message ``seq``, which nothing answered, and
        start its turn (``services/resend.py``)."""
        text = sessions.check_text(text)
        edited = functools.partial(resend.session_edit, session_id=session_id, user=user, seq=seq, text=text)
        return await self._redo(session_id, user, edited, text=text)

    async def _redo(
        self, session_id: uuid.UUID, user: User, redo: Callable[[], Redone], *, text: str
    ) -> Redone:
        done: list[Redone] = []

        def begun() -> Begin:
            done.append(redo())
            return done[0].begin

        begin, live = await self._beginning(session_id, user.pk, begun)
        assert live is not None  # a retry or an edit never steers
        first: list[Frame] = []
        if done[0].superseded:
            first.append(frames.superseded(seqs=done[0].superseded, reason=done[0].reason))
        if begin.message is not None:
            author = user.get_username()
            first.append(frames.user_message(seq=begin.message.seq, text=text, author=author, kind="human"))
        await self._start(live, begin, first)
        return done[0]

    # ------------------------------------------------------------------ agents' questions

    async def ask(self, asking: Callable[..., A]) -> A:
        """Record a question (``asking``, the interface's call of ``question_ask`` on the database
        threads) and start its sub-chat's first turn at once, or, past the running-turn limits,
        leave it open until a turn frees up (docs/domain.md). A question asked before with the
        same idempotency key is returned as it is; one answered at once with an earlier answer, or
        joined to one still unsettled (not with ``fresh``), has no sub-chat to start. A question
        the reuse judge should see first comes back unrecorded with the judge's call: the judge is
        asked here, between two database calls, and ``asking`` again with its ``verdict``. What
        ``asking`` returns (an ``Asked``, or what the interface makes of it on the database side)
        comes back as it is."""
        asked = await db(asking)()
        if asked.judge is not None:
            said = await reuse_judging.verdict(asked.judge, gateway=self.gateway)
            asked = await db(functools.partial(asking, verdict=said))()
        if asked.start is not None:
            await self._start_question(asked.start)
        return asked

    async def _start_question(self, question: WaitingQuestion) -> TurnsFullError | UnavailableError | bool:
        """Start the question's first turn: True if it started here, False if it no longer waits
        (started elsewhere, settled) or cannot start (the humans settle it), else the limit that
        keeps it waiting (or the channel layer, down for a moment)."""
        begun = functools.partial(question_turns.question_turn_begin, question_id=question.id)
        try:
            await self.send_as(
                question.session_id,
                question.asker_id,
                begun,
                author=question.asker,
                seen=question.text,
                kind="question",
            )
        except agent_questions.QuestionNotWaitingError:
            return False
        except (TurnsFullError, UnavailableError) as exc:  # it waits, recorded, for a later pass
            self.hub.work_waiting = True
            return exc
        except BalletError as exc:  # the asker lost access meanwhile: the humans settle it
            logger.warning("question %s cannot start: %s", question.id, exc.message)
            await db(agent_questions.question_unstartable)(question_id=question.id, reason=exc.message)
            return False
        return True

    async def start_waiting(self, *, force: bool = False) -> list[uuid.UUID]:
        """Start what the running-turn limits kept waiting while turns are free (a
        :class:`waiting.Pass`); the sessions whose turns started here. Without ``force`` only
        when this process saw something wait, or the database holds some (what waits may have
        been queued by a process since gone). Never raises: a pass that cannot read what waits
        (the database down) is logged, and a later pass reads it again."""
        one = waiting.Pass(
            follow_up=self._follow_up,
            resume=self._resume,
            question=self._start_question,
            subchat=functools.partial(subchats.start_waiting, self),
        )
        try:
            if not (force or self.hub.work_waiting or await db(work_waiting)()):
                return []
            self.hub.work_waiting = False
            await one.run()
            self.hub.work_waiting = self.hub.work_waiting or one.left_waiting
        except UnavailableError:  # the channel layer is down: a later pass starts them
            self.hub.work_waiting = True
        except Exception:  # what waits could not be read: a later pass reads it again
            logger.exception("a pass over the work waiting for a free turn failed")
            self.hub.work_waiting = True
        return one.started

    async def _follow_up(self, session_id: uuid.UUID) -> TurnsFullError | bool:
        """Start the turn that answers the steering a dead turn never read: True if it started
        here, False if nothing waits for it any more, the limit that holds it else."""
        live, begin = None, None
        try:
            async with self.hub.opening(session_id) as opening:
                begin = await db(sessions.follow_up_start)(session_id=session_id)
                if begin is not None:
                    live = await _resumed(opening, begin)
        except TurnsFullError as held:
            return held
        if live is None or begin is None:
            return False
        await self._start(live, begin, [])
        return True

    async def withdraw(
        self, withdrawing: Callable[[], agent_questions.Withdrawn]
    ) -> agent_questions.Withdrawn:
        """Withdraw a question (``withdrawing``, the interface's call of ``question_withdraw``: its
        asker or a project admin) and stop its sub-chat's turn, unless questions joined to it
        still wait on it."""
        done = await db(withdrawing)()
        if done.session_id is None:
            return done
        live = self.hub.turn_here(done.session_id)
        if live is not None:
            live.stop()
            return done
        viewed = functools.partial(question_turns.withdrawn_session, session_id=done.session_id)
        cancel = functools.partial(human_requests.requests_cancel_unwaited, session_id=done.session_id)
        await self._stop(await db(viewed)(), cancel, viewed)
        return done

    async def recover(self, session_id: uuid.UUID, *, answer: bool = True, start: bool = True) -> bool:
        """Recover the session if its turn's process died, and tell its watchers; True if it did.
        Steering the dead turn never read waits for an answer (not when its owner stops it:
        ``answer`` false), started here at once unless the caller starts it (``start`` false)."""
        recovered = await db(sessions.session_recover_if_dead)(session_id=session_id, answer=answer)
        if recovered is None:
            return False
        await self.hub.publish(session_id, list(recovered.frames))
        if recovered.parent_id is not None:  # a sub-chat's parent hears it failed
            await subchats.ended(self, session_id, parent_id=recovered.parent_id, failed=PROCESS_DIED)
        if recovered.answer_waiting and start:
            await self._follow_up_now(session_id)
        return True

    async def _follow_up_now(self, session_id: uuid.UUID) -> None:
        if await self._follow_up(session_id) is not True:
            self.hub.work_waiting = True  # held by a limit (or started elsewhere): a later pass sees

    async def wait(self, session_id: uuid.UUID) -> None:
        """Wait for the session's local turn to end, and what follows it (tests, shutdown)."""
        live = self.hub.turn_here(session_id)
        task = live.task if live is not None else self.hub.ending.get(session_id)
        if task is not None:
            await asyncio.shield(task)

    async def close_clients(self) -> None:
        """Close the model clients this event loop opened. A loop that ends while the process
        lives on (the worker's pass) must: each client holds its loop, and the two stay in memory
        for good (the worker grew 6 MB a minute so, docs/benchmarks.md#soak)."""
        if isinstance(self._gateway, ProviderGateway):
            await self._gateway.close()

    async def settle(self) -> None:
        """Wait for what follows every turn of this process on this event loop (tests, shutdown):
        the turns are over, their last database reads and writes are not."""
        loop = asyncio.get_running_loop()
        pending = [task for task in self.hub.ending.values() if task.get_loop() is loop and not task.done()]
        if pending:
            await asyncio.gather(*(asyncio.shield(task) for task in pending), return_exceptions=True)

    async def watch(self, *, session_id: uuid.UUID, user: User) -> AsyncGenerator[Frame, None]:
        """The session's frames: ``state``, the current turn's frames so far, then live ones.

        Frames of a turn in this process reach the watcher directly; the relay
        brings those of turns in other processes, and asks such a turn for its
        frames so far. Raises ``UnavailableError`` when the channel layer is down
        (at once, or later when this process loses it: the watcher reconnects
        and reloads what it missed).
        """
        viewed = functools.partial(session_view, user=user, session_id=session_id)
        session = await db(viewed)()
        if (
            session.state == SessionState.RUNNING
            and not self.hub.runs_here(session_id)
            and await self.recover(session_id, start=False)
        ):
            session = await db(viewed)()
        async with self.hub.watching(session_id) as (inbox, here):
            yield frames.state(
                session_state=session.state, last_seq=session.last_message_seq, turn=session.turn_count
            )
            if not here and session.state == SessionState.RUNNING:
                inbox.put_first(await self.hub.frames_elsewhere(session_id))
            if not here and session.state == SessionState.PAUSED:
                for frame in await db(_pending_frames)(session_id):
                    yield frame
            if session.state == SessionState.IDLE and session.answer_waiting:
                await self._follow_up_now(session_id)  # once this watcher hears it from the start
            del session, viewed  # what an idle watcher holds while it waits: as little as it can
            seen = Seen()
            while True:
                # Everything waiting, with runs of text deltas joined: a watcher behind a busy
                # server catches up in a few frames instead of one per delta.
                for frame in frames.coalesced(seen.fresh(await inbox.take())):
                    yield frame

    # ------------------------------------------------------------------ a turn

    async def _drive(
        self, live: LiveTurn, setup: TurnSetup, *, continued: bool, taken: starts.Slot | None = None
    ) -> None:
        """Run a turn of this process (``turn.py``), then stop serving it and let it go; after
        a turn of a chat still unnamed, propose its title (``titles.py``): the turn has ended by
        then, for its watchers and for a next message alike."""
        outcome = None
        try:
            gateway = starts.releasing(self.gateway, taken)
            outcome = await turn.drive(live, setup, continued=continued, gateway=gateway, hub=self.hub)
        finally:
            if taken is not None:
                taken.release()
            await self.hub.closing(live)
        if live.task is not None:
            self.hub.ending[live.session_id] = live.task
        try:
            if outcome is not None and outcome.reason == "paused":
                await subchats.start_round(self, live.session_id)  # those it waits for, if any
            elif outcome is not None and setup.parent_id is not None:
                await subchats.ended(self, live.session_id, parent_id=setup.parent_id)
            await self.start_waiting()  # a turn is free
            if outcome is not None and setup.untitled and titles.wanted(reason=outcome.reason):
                await titles.propose(
                    session_id=live.session_id, gateway=self.gateway, announce=self.hub.publish
                )
        finally:
            if self.hub.ending.get(live.session_id) is live.task:
                del self.hub.ending[live.session_id]


async def _resumed(opening: Opening, begin: Begin) -> LiveTurn:
    """Register the paused or waiting turn ``begin`` resumed, run as its owner; steering may have
    waited while it was paused."""
    owner_id = begin.setup.user_id if begin.setup else None
    return await opening.turn(turn=begin.turn, user_id=owner_id, inputs_waiting=True)


def _pending_frames(session_id: uuid.UUID) -> list[Frame]:
    return [human_requests.request_frame(r) for r in human_requests.pending_requests(session_id=session_id)]


runner = Runner()
