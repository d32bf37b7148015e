"""A turn's end (``turn_end``): the session's state after it, a question it leaves, and the
usage metered on the way (``usage_save``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from planner.agent import frames
from planner.agent.calls import CallRecord
from planner.agent.frames import Frame, TurnEndReason
from planner.agent.messages import ChatMessage
from planner.domain.services.sessions.inputs import append_steering
from planner.domain.services.sessions.progress import StepRecords, question_left, state_after, usage_row
from planner.domain.services.sessions.rows import Ended, TurnSupersededError, check_current
from planner.models import (
    Event,
    Session,
)
from tracker.db.locks import locked as row_locked


@dataclass(frozen=True)
class TurnEnd:
    """What :func:`turn_end` did: ``status`` "ended", "steered" (a completed turn has steering
    waiting, and goes on) or "superseded" (the session was recovered meanwhile); the steering the
    turn never read, stored before its end, with its authors' names
    (docs/architecture.md#stopping-pausing-answering)."""

    status: Ended
    steering: list[tuple[ChatMessage, str]] = field(default_factory=list)


@transaction.atomic
def turn_end(
    *,
    session_id: uuid.UUID,
    turn: int,
    reason: TurnEndReason,
    error: str | None,
    records: StepRecords | None = None,
    final: bool = False,
) -> TurnEnd:
    """Record the end of a turn, if it is still the session's running turn in this process.

    ``records`` (usage already paid for, tool calls that ran) are written in any case. A
    completed turn with steering waiting goes on ("steered"), unless it is ``final`` (it went on
    as often as it may). Steering the turn ends without reading is stored as its authors'
    messages before the end: it comes before anything sent later, in the history the next turn
    answers.
    """
    session = row_locked(Session.objects.all()).get(pk=session_id)
    if records is not None:
        records.write(session_id, turn)
    try:
        check_current(session, turn)
    except TurnSupersededError:
        return TurnEnd("superseded")
    if reason == "completed" and session.steering and not final:
        return TurnEnd("steered")
    steering = append_steering(session, turn)
    session.state = state_after(reason)
    session.turn_owner = ""
    session.heartbeat_at = None
    session.save(
        update_fields=["state", "turn_owner", "heartbeat_at", "steering", "last_message_seq", "updated_at"]
    )
    data: dict[str, Any] = {"reason": reason}
    if error:
        data["error"] = error
    Event.objects.create(session_id=session_id, kind="turn_ended", turn=turn, data=data)
    question_left(session, reason, error)
    return TurnEnd("ended", steering)


def steering_frames(steering: list[tuple[ChatMessage, str]]) -> list[Frame]:
    """The frames that show watchers steering stored for a turn that ended without reading it."""
    return [frames.user_message(seq=m.seq, text=m.text, author=a, kind="steer") for m, a in steering]


def usage_save(*, project_id: int, session_id: uuid.UUID | None, record: CallRecord) -> None:
    usage_row(project_id, session_id, record).save()
