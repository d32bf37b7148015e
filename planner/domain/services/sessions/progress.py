"""How a turn moves on, in one statement with its step: the session row advanced, its tool
calls and usage recorded, and the state and question a turn leaves behind."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, assert_never

from django.utils import timezone

from planner.agent.calls import CallRecord
from planner.agent.frames import TurnEndReason
from planner.agent.messages import ChatMessage, ToolUseBlock
from planner.domain.services.agent_questions import question_unanswered
from planner.domain.services.sessions.rows import WAITS, TurnSupersededError, waits
from planner.domain.tools import ToolOutcome
from planner.ground.process import PROCESS_ID
from planner.models import (
    Session,
    SessionState,
    ToolCall,
    UsageRecord,
)
from tracker.db import model_rows, sql
from tracker.errors import (
    ConflictError,
)


@dataclass(frozen=True)
class ToolRecord:
    """A tool call as it ran, stored with the round's results."""

    call: ToolUseBlock
    outcome: ToolOutcome
    duration_ms: float
    actor: str
    user_id: int


@dataclass
class StepRecords:
    """What a step of a turn stores beside its message, in the same transaction."""

    usage: list[CallRecord] = field(default_factory=list)
    tools: list[ToolRecord] = field(default_factory=list)
    project_id: int = 0

    def write(self, session_id: uuid.UUID, turn: int) -> None:
        usage, tools = self.rows(session_id, turn)
        if usage:
            model_rows.insert(usage)
        if tools:
            model_rows.insert(tools)

    def rows(self, session_id: uuid.UUID, turn: int) -> tuple[list[UsageRecord], list[ToolCall]]:
        """The rows to store (the records are then given up: stored with this step or never)."""
        usage = [usage_row(self.project_id, session_id, r) for r in self.usage]
        tools = [_tool_row(session_id, turn, r) for r in self.tools]
        self.usage.clear()
        self.tools.clear()
        return usage, tools


def _tool_row(session_id: uuid.UUID, turn: int, record: ToolRecord) -> ToolCall:
    return ToolCall(
        session_id=session_id,
        turn=turn,
        tool_use_id=record.call.id,
        name=record.call.name,
        input=record.call.input,
        output=record.outcome.output,
        is_error=record.outcome.is_error,
        duration_ms=record.duration_ms,
        actor=record.actor,
        on_behalf_of_id=record.user_id,
    )


@dataclass(frozen=True)
class Saved:
    messages: list[ChatMessage]  # as stored, with their seqs
    inputs_waiting: bool  # steering or change notes wait for the next model call
    steering_waiting: bool = False
    ended: bool = False  # the answer ended the turn (``completed``)

    @property
    def message(self) -> ChatMessage:
        return self.messages[-1]


@dataclass(frozen=True)
class _Advanced:
    ended: bool  # the turn ended
    steering: bool = False  # or steering waits for its next model call
    notes: bool = False  # change notes wait for it

    def saved(self, messages: list[ChatMessage]) -> Saved:
        if self.ended:
            return Saved(messages=messages, inputs_waiting=False, ended=True)
        waiting = self.steering or self.notes
        return Saved(messages=messages, inputs_waiting=waiting, steering_waiting=self.steering)


# What a step's update returns: whether it ended the turn, and what waits (``WAITS``).
MOVED = {"ended": "planner_session.turn_owner = ''", **WAITS}


@dataclass(frozen=True)
class _Step:
    """A step's update of the session's row (:func:`step_update`)."""

    session_id: uuid.UUID
    turn: int
    values: dict[str, Any]
    where: str
    params: list[Any]

    def advanced(self, found: sql.Row | None) -> _Advanced:
        """What the update did, from the row it returned (``MOVED``); refused if it moved none:
        the turn is no longer this process's, or something was stored since."""
        if found is None:
            current, params = _current(self.session_id, self.turn)
            if not sql.row(f"SELECT 1 FROM planner_session WHERE {current}", params):  # noqa: S608
                raise TurnSupersededError(f"Session {self.session_id} no longer runs turn {self.turn} here.")
            raise ConflictError(f"Session {self.session_id} changed under its running turn.")
        if found[0]:
            return _Advanced(ended=True)
        steering, notes = waits(found[1:])
        return _Advanced(ended=False, steering=steering, notes=notes)


def _current(session_id: uuid.UUID, turn: int) -> tuple[str, list[Any]]:
    """The condition that this process runs ``turn`` of the session (the session's only writer
    then), and its parameters."""
    key = model_rows.prep(Session, "id", session_id)
    return "id = %s AND state = %s AND turn_owner = %s AND turn_count = %s", [
        key,
        SessionState.RUNNING,
        PROCESS_ID,
        turn,
    ]


def step_update(
    session_id: uuid.UUID, turn: int, after_seq: int, changes: dict[str, Any], *, end: bool
) -> _Step:
    """The update moving the session's row past the messages being stored, if this process runs
    ``turn`` and nothing was stored since ``after_seq`` (the seq check proves it); with ``end``,
    ending the turn unless steering waits (each column the end changes checks it itself)."""
    now = timezone.now()
    values: dict[str, Any] = changes | {"heartbeat_at": now, "updated_at": now}
    if end:
        idle = ("steering = %s", [model_rows.prep(Session, "steering", [])])
        values |= {
            "state": model_rows.Case(*idle, state_after("completed")),
            "turn_owner": model_rows.Case(*idle, ""),
            "heartbeat_at": model_rows.Case(*idle, None, otherwise=now),
        }
    current, params = _current(session_id, turn)
    return _Step(session_id, turn, values, f"{current} AND last_message_seq = %s", [*params, after_seq])


def advance_made(
    session_id: uuid.UUID, turn: int, after_seq: int, changes: dict[str, Any], *, end: bool
) -> _Advanced:
    """:func:`step_update`'s update, made: whether it ended the turn, or else what waits for the turn's
    next model call (read by the update itself: no round trip of its own)."""
    step = step_update(session_id, turn, after_seq, changes, end=end)
    key = step.params[0]
    returning = ", ".join(MOVED.values())
    return step.advanced(
        model_rows.update_returning(
            Session, step.values, step.where, step.params, pk=key, returning=returning
        )
    )


def advance(session_id: uuid.UUID, turn: int, after_seq: int, changes: dict[str, Any]) -> None:
    """Change the row of the session whose running ``turn`` this process owns, if nothing was
    stored since ``after_seq`` (a turn pausing on requests); the caller holds the transaction."""
    advance_made(session_id, turn, after_seq, changes, end=False)


UNANSWERED: dict[TurnEndReason, str] = {
    "completed": "The planner ended its turn without answering.",
    "failed": "The planner's turn failed before it answered",
    "max_rounds": "The planner ran out of rounds before it answered.",
    "stopped": "The planner's turn was stopped before it answered.",
}


def question_left(session: Session, reason: TurnEndReason, error: str | None = None) -> None:
    """A question's sub-chat whose turn ended without an answer leaves the question to the
    project's humans, saying why: a question never hangs."""
    if session.question_id is None:
        return
    why = f"{UNANSWERED[reason]}: {error}" if reason == "failed" and error else UNANSWERED[reason]
    question_unanswered(question_id=session.question_id, reason=why)


def state_after(reason: TurnEndReason) -> SessionState:
    """The session's state once a turn ended for ``reason``: a turn out of rounds waits to be continued."""
    match reason:
        case "max_rounds":
            return SessionState.PAUSED
        case "completed" | "stopped" | "failed":
            return SessionState.IDLE
        case _:
            assert_never(reason)


def usage_row(project_id: int, session_id: uuid.UUID | None, record: CallRecord) -> UsageRecord:
    return UsageRecord(
        project_id=project_id,
        session_id=session_id,
        purpose=record.purpose,
        model=record.model,
        input_tokens=record.usage.input_tokens,
        output_tokens=record.usage.output_tokens,
        cache_creation_input_tokens=record.usage.cache_creation_input_tokens,
        cache_read_input_tokens=record.usage.cache_read_input_tokens,
        latency_ms=record.latency_ms,
        outcome=record.outcome,
        error=record.error,
    )
