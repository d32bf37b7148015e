"""A turn's steps, saved one transaction each: the model's message and the round's tool calls
(``message_save``), a continuation or close, a compaction's summary."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from planner.agent.frames import TurnEndReason
from planner.agent.messages import ChatMessage, ToolUseBlock, Usage
from planner.domain.metrics import TOOL_CALLS, TURNS
from planner.domain.selectors import session_history
from planner.domain.services.agent_questions import question_unanswered
from planner.domain.services.drafts import drafts_from_summary
from planner.domain.services.sessions.inputs import append_steering
from planner.domain.services.sessions.progress import (
    MOVED,
    UNANSWERED,
    Saved,
    StepRecords,
    ToolRecord,
    advance_made,
    question_left,
    state_after,
    step_update,
)
from planner.domain.services.sessions.rows import append, message_row
from planner.domain.services.sessions.turns import Begin, run_here, turn_open
from planner.domain.tools import ToolContext, call_tool
from planner.models import (
    Event,
    Session,
)
from tracker.db import model_rows, sql


@transaction.atomic
@sql.batched(ends_transaction=True)  # the step's inserts go with the read of what waits, or the commit
def message_save(
    *,
    session_id: uuid.UUID,
    turn: int,
    after_seq: int,
    message: ChatMessage,
    usage: Usage | None = None,
    focus: list[str] | None = None,
    records: StepRecords | None = None,
    last: bool = False,
    then: ChatMessage | None = None,
    question_id: int | None = None,
) -> Saved:
    """Store an assistant answer (with its reported usage) or a tool-results message.

    ``records`` (metered calls, the round's tool calls) are written in the
    same transaction: one commit per step of a turn. The answer also says
    whether input waits for the next model call, sparing it a round trip. The
    ``last`` answer of a turn (no tool calls) ends it ``completed`` in the same
    transaction, unless steering waits: then the turn goes on. ``then``
    (the results of an answer's calls that only read) is stored right after it. ``question_id``:
    the question of a sub-chat, which a turn that ends here without answering leaves to the humans.
    """
    stored = [message] if then is None else [message, then]
    changes: dict[str, Any] = {"last_message_seq": after_seq + len(stored)}
    if usage is not None and usage.context_tokens:
        changes |= {"context_tokens": usage.context_tokens, "context_tokens_seq": after_seq + 1}
    if focus is not None:
        changes["focus"] = focus
    saved = [replace(m, seq=after_seq + i) for i, m in enumerate(stored, start=1)]
    if connection.vendor == "postgresql" and question_id is None:
        return _saved_at_once(session_id, turn, after_seq, changes, saved, records=records, end=last)
    advanced = advance_made(session_id, turn, after_seq, changes, end=last)
    model_rows.insert([message_row(session_id, turn, m) for m in saved])
    if records is not None:
        records.write(session_id, turn)
    if advanced.ended:
        model_rows.insert(
            [Event(session_id=session_id, kind="turn_ended", turn=turn, data={"reason": "completed"})]
        )
        if question_id is not None:
            question_unanswered(question_id=question_id, reason=UNANSWERED["completed"])
    return advanced.saved(saved)


def _saved_at_once(
    session_id: uuid.UUID,
    turn: int,
    after_seq: int,
    changes: dict[str, Any],
    saved: list[ChatMessage],
    *,
    records: StepRecords | None,
    end: bool,
) -> Saved:
    """:func:`message_save` on PostgreSQL in one statement, sent with the COMMIT: the row's
    update (:func:`step_update`), the step's rows inserted only if it moved the row (the turn's end only
    if it ended it), and what waits read back (``model_rows.update_inserting``). Nothing is stored when
    the row did not move: then the refusal :func:`advance_made` gives."""
    step = step_update(session_id, turn, after_seq, changes, end=end)
    rows: list[tuple[Any, str]] = [(message_row(session_id, turn, m), "") for m in saved]
    if records is not None:
        usage, tools = records.rows(session_id, turn)
        rows += [(row, "") for row in [*usage, *tools]]
    if end:
        done = Event(session_id=session_id, kind="turn_ended", turn=turn, data={"reason": "completed"})
        rows.append((done, "ended"))
    # A step holds the transcript alone: its own commit need not wait for the disk, as SQLite's does
    # not in the embedded mode (docs/architecture.md#commits-that-need-no-flush); a caller's, never.
    found = model_rows.update_inserting(
        Session,
        step.values,
        step.where,
        step.params,
        returning=MOVED,
        inserting=rows,
        no_flush=sql.outermost(),
    )
    return step.advanced(found).saved(saved)


def turn_continue(session: Session, results: ChatMessage) -> Begin:
    """Continue the session's turn that was paused on requests, now that none is pending: store
    the round's ``results``, deliver change notes, open the turn again in this process. The caller
    holds the session's row lock (its ``user`` loaded: the owner, as whom the turn acts)."""
    history = session_history(session=session)
    session.resume_waiting = False
    run_here(session, history, results, None, also=("focus", "resume_waiting"))
    setup = turn_open(session, history, continued=True)
    return Begin("continued", session.turn_count, None, setup=setup)


def turn_close(session: Session, results: ChatMessage, *, reason: TurnEndReason) -> None:
    """End the session's paused turn for ``reason`` (stopped): store the round's ``results`` so the
    history stays valid. The caller holds the session's row lock."""
    append(session, results, session.turn_count)
    append_steering(session, session.turn_count)  # before the end, as turn_end stores it
    session.state = state_after(reason)
    session.turn_owner = ""
    session.heartbeat_at = None
    session.resume_waiting = False
    fields = ["last_message_seq", "focus", "state", "turn_owner", "heartbeat_at", "resume_waiting"]
    session.save(update_fields=[*fields, "steering", "updated_at"])
    Event.objects.create(session=session, kind="turn_ended", turn=session.turn_count, data={"reason": reason})
    question_left(session, reason)
    transaction.on_commit(TURNS.labels(reason).inc)


def tool_run(*, context: ToolContext, call: ToolUseBlock) -> ToolRecord:
    """Run one tool call; its record is stored with the round's results."""
    started = time.perf_counter()
    outcome = call_tool(call.name, call.input, context)
    TOOL_CALLS.labels(call.name, "error" if outcome.is_error else "ok").inc()
    return ToolRecord(
        call=call,
        outcome=outcome,
        duration_ms=(time.perf_counter() - started) * 1000,
        actor=context.actor.label,
        user_id=context.user.pk,
    )


@transaction.atomic
def summary_save(*, session_id: uuid.UUID, turn: int, summary: str, up_to: int, estimated_tokens: int) -> int:
    """Store the compaction's summary, and draft its durable parts as knowledge for the session's
    owner (``planner/domain/services/drafts.py``); how many drafts it left."""
    Session.objects.filter(pk=session_id).update(
        summary=summary,
        summary_up_to=up_to,
        context_tokens=0,
        context_tokens_seq=0,
        updated_at=timezone.now(),
    )
    Event.objects.create(
        session_id=session_id,
        kind="planner.compacted",
        turn=turn,
        data={"up_to": up_to, "estimated_tokens": estimated_tokens},
    )
    session = Session.objects.select_related("project").get(pk=session_id)
    return drafts_from_summary(session, summary=summary, up_to=up_to)
