"""A pass over what the running-turn limits kept waiting (docs/domain.md#agents-questions): the
turns that answer steering a dead turn never read, the turns an answered request resumes, the
sub-chats a paused turn waits for that have not started (docs/domain.md#sub-chats), then the
questions whose sub-chat has not started, each oldest first.

The runner says how each starts (:class:`Pass`'s callables); the pass says in which order,
and keeps one that cannot start from holding back the others: what a full limit holds is not
tried again in the same pass, and what fails for another reason is logged, counted and passed
over (a question, after a few such failures, is left to the humans).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from planner.domain.metrics import START_FAILURES
from planner.domain.services import agent_questions, human_requests, sessions, subchat_waits
from planner.domain.services.agent_questions import WaitingQuestion
from planner.domain.services.sessions import TurnsFullError
from planner.ground.bridge import db
from tracker.errors import UnavailableError

logger = logging.getLogger(__name__)

Waiting = tuple[uuid.UUID, int, int]  # a session that waits: its id, its owner's, its project's
SessionStart = Callable[[uuid.UUID], Awaitable[TurnsFullError | bool]]
QuestionStart = Callable[[WaitingQuestion], Awaitable[TurnsFullError | UnavailableError | bool]]


@dataclass
class FullLimits:
    """The running-turn limits found full in one pass: the users and projects whose turns are
    all taken."""

    users: set[int] = field(default_factory=set)
    projects: set[int] = field(default_factory=set)

    def holds(self, user_id: int, project_id: int) -> bool:
        return user_id in self.users or project_id in self.projects

    def add(self, held: TurnsFullError, user_id: int, project_id: int) -> None:
        if held.scope == "user":
            self.users.add(user_id)
        else:
            self.projects.add(project_id)


@dataclass
class Pass:
    """One pass. Each callable starts one session's turn or one question's first turn: True if it
    started here, False if it no longer waits, else the limit that holds it (or, for a question,
    the channel layer, down: the pass ends with ``UnavailableError``)."""

    follow_up: SessionStart
    resume: SessionStart
    question: QuestionStart
    subchat: SessionStart | None = None  # a sub-chat's first turn its parent waits for
    started: list[uuid.UUID] = field(default_factory=list)  # the sessions whose turns started here
    left_waiting: bool = False  # something still waits: a later pass must look again
    full: FullLimits = field(default_factory=FullLimits)

    async def run(self) -> None:
        await self._sessions(sessions.sessions_follow_up_waiting, self.follow_up)
        await self._sessions(human_requests.sessions_resume_waiting, self.resume)
        if self.subchat is not None:
            await self._sessions(subchat_waits.subchats_waiting, self.subchat)
        await self._questions()

    async def _sessions(self, waiting: Callable[[], list[Waiting]], start: SessionStart) -> None:
        """``start`` each session ``waiting`` lists (id, owner, project) that no full limit holds."""
        for session_id, owner, project in await db(waiting)():
            if self.full.holds(owner, project):
                continue
            try:
                done = await start(session_id)
            except UnavailableError:
                raise
            except Exception:  # one session that cannot start holds back none behind it
                logger.exception("session %s waiting for a free turn failed to start", session_id)
                START_FAILURES.labels("session").inc()
                self.left_waiting = True
                continue
            if done is True:
                self.started.append(session_id)
            elif done:
                self.full.add(done, owner, project)
                self.left_waiting = True

    async def _questions(self) -> None:
        for question in await db(agent_questions.questions_waiting)():
            if self.full.holds(question.asker_id, question.project_id):
                continue
            try:
                held = await self.question(question)
            except Exception as exc:  # one question that cannot start holds back none behind it
                await self._question_failed(question, exc)
                continue
            if isinstance(held, UnavailableError):
                raise held
            if held is True:
                self.started.append(question.session_id)
            elif held:
                self.full.add(held, question.asker_id, question.project_id)
                self.left_waiting = True

    async def _question_failed(self, question: WaitingQuestion, exc: Exception) -> None:
        """Log and count a question whose start failed unexpectedly; after a few such failures
        the humans settle it (needs_human, with the reason)."""
        reason = f"{type(exc).__name__}: {exc}"[:500]
        logger.error("question %s failed to start: %s", question.id, reason, exc_info=exc)
        START_FAILURES.labels("question").inc()
        self.left_waiting = True
        try:
            left = await db(agent_questions.question_start_failed)(question_id=question.id, reason=reason)
        except Exception:  # the database is down too: a later pass counts it
            logger.warning("question %s: its failure to start was not recorded", question.id, exc_info=True)
            return
        if left:
            logger.warning("question %s is left to the humans after repeated failures to start", question.id)
