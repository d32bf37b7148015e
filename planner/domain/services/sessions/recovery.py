"""Turns whose process died, recovered (``session_recover_if_dead``, ``sessions_recover_dead``);
and the follow-up turn that answers the steering a dead turn never read (``follow_up_start``,
``sessions_follow_up_waiting``)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from planner.agent import frames
from planner.agent.frames import Frame
from planner.agent.messages import ChatMessage, ToolResultBlock
from planner.domain.metrics import TURNS
from planner.domain.selectors import session_history
from planner.domain.services.sessions.ends import steering_frames
from planner.domain.services.sessions.inputs import append_steering
from planner.domain.services.sessions.progress import question_left
from planner.domain.services.sessions.rows import (
    INTERRUPTED_RESULT,
    RECOVERED,
    append,
    session_locked,
    session_save,
    turns_limit_check,
)
from planner.domain.services.sessions.turns import Begin, run_here, turn_open
from planner.ground.process import owner_alive
from planner.models import (
    Event,
    Message,
    MessageKind,
    Session,
    SessionState,
    ToolCall,
)
from tracker.db.locks import locked as row_locked
from tracker.trust.permissions import (
    PLANNER_CHAT,
    has_permission,
)


def _recovered_results(session: Session, pending: list[str]) -> ChatMessage:
    """Results for calls left unanswered: the recorded output where the call ran, else an error."""
    ran = {c.tool_use_id: c for c in ToolCall.objects.filter(session=session, tool_use_id__in=pending)}
    blocks = []
    for tool_use_id in pending:
        call = ran.get(tool_use_id)
        if call is not None:
            content, is_error = json.dumps(call.output, ensure_ascii=False, default=str), call.is_error
        else:
            content, is_error = INTERRUPTED_RESULT, True
        blocks.append(ToolResultBlock(tool_use_id, content, is_error=is_error))
    return ChatMessage(role="user", content=tuple(blocks), kind=MessageKind.TOOL_RESULTS)


def _recover(session: Session, *, answer: bool = True) -> tuple[Frame, ...]:
    """Close a turn whose process died: answer pending calls, keep the steering it never read,
    log the failure, go idle; the frames that tell watchers so.

    Steering accepted for the dead turn is stored as the humans' messages, and the session waits
    for a turn that answers them (``answer_waiting``; not when its owner stops it, ``answer``
    false): a message the server accepted is never lost, nor left unanswered.
    """
    last = Message.objects.filter(session=session).order_by("-seq").first()
    if last is not None and last.role == "assistant":
        pending = [b["id"] for b in last.content if b.get("type") == "tool_use"]
        if pending:
            append(session, _recovered_results(session, pending), last.turn)
    steering = append_steering(session, session.turn_count)
    Event.objects.create(
        session=session,
        kind="turn_ended",
        turn=session.turn_count,
        data={"reason": "failed", "error": RECOVERED},
    )
    session.state = SessionState.IDLE
    session.turn_owner = ""
    session.heartbeat_at = None
    session.answer_waiting = answer and bool(steering)
    fields = ["state", "turn_owner", "heartbeat_at", "steering", "last_message_seq", "answer_waiting"]
    session.save(update_fields=[*fields, "updated_at"])
    question_left(session, "failed", RECOVERED)
    # Its process died before counting it: the turn is counted here, by whichever process
    # recovers it (the Celery sweep, or a daphne the session is opened in), once committed.
    transaction.on_commit(TURNS.labels("failed").inc)
    return (*steering_frames(steering), recovered_frame())


def recovered_frame() -> frames.TurnEndedFrame:
    """The ``turn_ended`` frame that tells watchers what :func:`_recover` stored."""
    return frames.turn_ended(reason="failed", error=RECOVERED)


def recover_if_dead(session: Session, *, answer: bool = True) -> tuple[Frame, ...]:
    """:func:`_recover` if the session's turn lost its process; what to tell its watchers
    (nothing: it did not)."""
    if session.state != SessionState.RUNNING:
        return ()
    if owner_alive(session_id=session.pk, owner=session.turn_owner, heartbeat_at=session.heartbeat_at):
        return ()
    return _recover(session, answer=answer)


@dataclass(frozen=True)
class Recovered:
    """A session recovered from a dead turn: what to tell its watchers, and whether a turn must
    answer the steering the dead turn never read (:func:`follow_up_start`)."""

    session_id: uuid.UUID
    frames: tuple[Frame, ...]
    answer_waiting: bool
    parent_id: uuid.UUID | None = None  # a sub-chat's: its parent's turn waits for its end


@transaction.atomic
def session_recover_if_dead(*, session_id: uuid.UUID, answer: bool = True) -> Recovered | None:
    """Recover the session if its turn's process died (docs/architecture.md); None if it did not."""
    session = row_locked(Session.objects.filter(pk=session_id)).first()
    told = recover_if_dead(session, answer=answer) if session is not None else ()
    if session is None or not told:
        return None
    return Recovered(session.pk, told, session.answer_waiting, session.parent_id)


def sessions_recover_dead() -> list[Recovered]:
    """Recover every running session whose process died; the periodic sweep calls this."""
    running = Session.objects.filter(state=SessionState.RUNNING).values_list("pk", flat=True)
    return [found for pk in list(running) if (found := session_recover_if_dead(session_id=pk))]


@transaction.atomic
def follow_up_start(*, session_id: uuid.UUID) -> Begin | None:
    """Start, in this process, the turn that answers the steering a dead turn never read
    (:func:`_recover`); None if nothing waits for it any more (a later message or another
    process started a turn, its owner lost ``planner.chat``, the chat was archived). Past the
    running-turn limits it raises :class:`TurnsFullError` and keeps waiting."""
    session = session_locked(session_id)
    if session is None or session.state != SessionState.IDLE or not session.answer_waiting:
        return None
    session.user = User.objects.get(pk=session.user_id)
    if session.archived_at is not None or not has_permission(session.user, session.project, PLANNER_CHAT):
        session.answer_waiting = False
        session_save(session, ["answer_waiting"])
        return None
    turns_limit_check(session, session.user, settings.BALLET_LIMITS)
    session.turn_count += 1
    history = session_history(session=session)
    run_here(session, history, None, session.user, also=("turn_count",))
    setup = turn_open(session, history, continued=False)
    return Begin("started", session.turn_count, None, setup=setup)


def sessions_follow_up_waiting(*, limit: int = 100) -> list[tuple[uuid.UUID, int, int]]:
    """Sessions whose steering waits for a turn to answer it, longest waiting first: (id, owner,
    project)."""
    waiting = Session.objects.filter(state=SessionState.IDLE, answer_waiting=True).order_by("updated_at")
    return list(waiting.values_list("pk", "user_id", "project_id")[:limit])
