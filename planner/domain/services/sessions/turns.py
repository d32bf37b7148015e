"""Opening a turn in this process: what the runner is handed to run it (:class:`Begin`), with
the prompt reads kept for the next turn of the session."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from planner.agent.frames import Frame
from planner.agent.loop import History
from planner.agent.messages import ChatMessage
from planner.domain.prompt import prompt_reads
from planner.domain.selectors import TurnSetup, tool_context_keep, turn_setup
from planner.domain.services.sessions.inputs import append_notes
from planner.domain.services.sessions.rows import Meaning, append, session_save
from planner.ground.process import PROCESS_ID
from planner.models import (
    Event,
    Session,
    SessionState,
)
from tracker.db import model_rows, sql


@dataclass(frozen=True)
class Begin:
    meaning: Meaning
    turn: int
    message: ChatMessage | None  # None when steering: delivered at the next model call
    recovered: tuple[Frame, ...] = ()  # a dead turn of the session was recovered first: what to tell
    setup: TurnSetup | None = None  # where the turn it started or continued starts from
    # To send before the turn's own: the requests a reply resolved, the approved calls it ran.
    frames: tuple[Frame, ...] = ()


# The reply to a turn paused on requests (``planner/domain/services/human_requests.py``), given by the
# runner: the turn it resumes, or None when no request waits. It runs in session_begin's
# transaction, under its lock.
Reply = Callable[[Session, User, str], "Begin | None"]


# Per session, what the prompt of its last turn started in this process read (session_begin).
PROMPT_READS: dict[uuid.UUID, list[sql.Statement]] = {}


KEPT_PROMPT_READS = 10_000


def run_here(
    session: Session,
    history: History,
    first: ChatMessage | None,
    author: User | None,
    *,
    also: tuple[str, ...],
) -> ChatMessage | None:
    """Store ``first`` (and the change notes since the session last looked) as the turn's next
    messages, in the session and its ``history``, and make this process the turn's runner; the
    row is saved with the fields in ``also``. The caller holds the session's row lock. A retry
    has no ``first``: its turn answers the history as it stands."""
    stored = None
    if first is not None:
        stored = append(session, first, session.turn_count, author)
        history.messages.append(stored)
    if session.project.organization.activity_seq > session.last_seen_seq:
        history.messages.extend(m for m, _ in append_notes(session, session.turn_count, session.focus))
    session.state = SessionState.RUNNING
    session.turn_owner = PROCESS_ID
    session.heartbeat_at = timezone.now()
    session.answer_waiting = False  # the turn answers the history as it stands
    fields = ["last_message_seq", "last_seen_seq", "state", "turn_owner", "heartbeat_at", "answer_waiting"]
    session_save(session, [*also, *fields])
    return stored


def turn_open(session: Session, history: History, *, continued: bool, retry: bool = False) -> TurnSetup:
    """Record ``turn_started`` (with the skill versions of its prompt); the turn's setup. What its
    prompt read is kept for the session's next start here (:func:`session_begin`)."""
    setup = turn_setup(session=session, history=history)
    tool_context_keep(session=session)
    if len(PROMPT_READS) >= KEPT_PROMPT_READS:
        PROMPT_READS.clear()
    PROMPT_READS[session.pk] = prompt_reads(session.project)
    data: dict[str, Any] = {
        "continued": continued,
        "skills": [{"name": n, "version": v} for n, v in setup.skills],
        "model": setup.settings.model,
    }
    if retry:
        data["retry"] = True
    model_rows.insert([Event(session=session, kind="turn_started", turn=session.turn_count, data=data)])
    return setup
