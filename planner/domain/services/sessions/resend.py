"""Retry a failed turn; edit and send again the last message nothing answered.

The rules are told in docs/protocol.md#retry-and-edit.

Both start a new turn of an idle session under its row lock, with the refusals and limits of
sending a message (``sessions.session_begin``): only the owner, not in an archived chat, not past
the message rate or the running-turn limits. Neither rewrites the transcript: what the model is
no longer sent is marked ``superseded`` and kept for the audit trail.

- **Retry**: the session is idle and its last turn ended ``failed`` or ``stopped``. The turn's
  unfinished answer (text kept when it broke off or was stopped, an answer cut off at the output
  limit) is superseded, so the history ends with what the human, the tools or the workspace
  said last, and a new turn answers it: no message is added, nothing is typed twice.
- **Edit**: the session is idle and no answer of the planner follows the human's last message
  (its turn failed or was stopped before the planner wrote anything). The message is superseded
  and the new text starts a new turn. While a turn runs the message is being answered: refused
  (a message still queued for the running turn is taken back with ``retract`` instead).

The page's view of the chat may be stale (another tab sent, the answer arrived meanwhile): an
edit names the message it edits, and every condition is checked again under the lock.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from planner.domain.selectors import session_history
from planner.domain.services.sessions.begin import count_message
from planner.domain.services.sessions.recovery import recover_if_dead
from planner.domain.services.sessions.rows import check_text, human, session_lock, turns_limit_check
from planner.domain.services.sessions.turns import Begin, run_here, turn_open
from planner.models import Event, Message, MessageKind, Session, SessionState, TitleSource
from tracker.errors import ConflictError, ValidationError

RETRYABLE = ("failed", "stopped")
HUMAN_KINDS = (MessageKind.HUMAN, MessageKind.CONTINUE, MessageKind.STEER)


class NotRetryableError(ConflictError):
    """The session's last turn is not one to retry: it completed, runs, or waits."""

    code = "not_retryable"


class NotEditableError(ConflictError):
    """The message is not the last human message, or something answered it meanwhile."""

    code = "not_editable"


@dataclass(frozen=True)
class Redone:
    """A retry or an edit: the turn it started, and the messages it superseded."""

    begin: Begin
    superseded: list[int]
    reason: Literal["edited", "retried"]


@transaction.atomic
def session_retry(*, session_id: uuid.UUID, user: User) -> Redone:
    """Run the session's failed or stopped last turn again, as a new turn on the same history."""
    session = session_lock(session_id, user)
    recovered = recover_if_dead(session)  # a turn whose process died ended failed: retryable
    _refuse_unless_idle(session.state, NotRetryableError, "retry it")
    ended = (
        Event.objects.filter(session=session, kind="turn_ended", turn=session.turn_count)
        .order_by("-pk")
        .values_list("data", flat=True)
        .first()
    )
    if session.turn_count == 0 or ended is None or ended.get("reason") not in RETRYABLE:
        raise NotRetryableError(
            "Only a turn that failed or was stopped can be retried, and the last turn of this chat "
            "did not: send a new message instead."
        )
    limits = settings.BALLET_LIMITS
    turns_limit_check(session, user, limits)
    count_message(user, limits)
    superseded = _supersede_unfinished(session)
    session.turn_count += 1
    history = session_history(session=session)
    run_here(session, history, None, user, also=("turn_count", "superseded_through"))
    _record(session, superseded, "retried")
    setup = turn_open(session, history, continued=False, retry=True)
    return Redone(Begin("started", session.turn_count, None, recovered, setup), superseded, "retried")


def _supersede_unfinished(session: Session) -> list[int]:
    """Supersede the unfinished answer that ends the last turn, if one does; the seqs.

    An interrupted turn keeps only text (its calls answered, a cut-off answer's calls dropped,
    ``planner/agent/loop.py``), and a user message always comes between two answers, so one
    message at most; the history then ends with a user message for the new turn to answer.
    """
    last = Message.objects.filter(session=session, superseded=False).order_by("-seq").first()
    if last is None:
        raise NotRetryableError("This chat has no message to answer: send one.")
    if last.role != "assistant":
        return []
    if last.turn != session.turn_count or any(b.get("type") != "text" for b in last.content):
        raise NotRetryableError("The last turn's end cannot be retried: send a new message instead.")
    Message.objects.filter(pk=last.pk).update(superseded=True)
    session.superseded_through = session.last_message_seq
    return [last.seq]


@transaction.atomic
def session_edit(*, session_id: uuid.UUID, user: User, seq: Any, text: Any) -> Redone:
    """Supersede the human's last message ``seq``, which nothing answered, and start a new turn
    with ``text`` in its place."""
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ValidationError({"seq": ["The number (seq) of the message to edit: a positive integer."]})
    text = check_text(text)
    session = session_lock(session_id, user)
    recovered = recover_if_dead(session)
    _refuse_unless_idle(session.state, NotEditableError, "edit your message")
    old = (
        Message.objects.filter(session=session, superseded=False, kind__in=HUMAN_KINDS)
        .order_by("-seq")
        .first()
    )
    if old is None or old.seq != seq:
        raise NotEditableError(
            f"Message {seq} is not your last message in this chat (another was sent meanwhile?): "
            "only the last one can be edited."
        )
    if Message.objects.filter(session=session, superseded=False, seq__gt=seq, role="assistant").exists():
        raise NotEditableError(
            "The planner has answered this message meanwhile, so it can no longer be edited: "
            "send a new message instead."
        )
    limits = settings.BALLET_LIMITS
    turns_limit_check(session, user, limits)
    count_message(user, limits)
    Message.objects.filter(pk=old.pk).update(superseded=True)
    session.superseded_through = session.last_message_seq
    session.turn_count += 1
    if session.title_source == TitleSource.NONE and session.title == _first_words(_text(old.content)):
        session.title = _first_words(text)  # named after the message it replaces: now after this one
    history = session_history(session=session)
    also = ("turn_count", "title", "superseded_through")
    message = run_here(session, history, human(text, MessageKind.HUMAN), user, also=also)
    _record(session, [seq], "edited", replaced_by=message.seq if message else None)
    setup = turn_open(session, history, continued=False)
    return Redone(Begin("started", session.turn_count, message, recovered, setup), [seq], "edited")


def _refuse_unless_idle(state: str, error: type[ConflictError], doing: str) -> None:
    if state == SessionState.RUNNING:
        raise error(
            f"The planner is working on this chat: stop its turn first, then {doing}. "
            "(A message still queued for the running turn is taken back with ↑, or a retract.)"
        )
    if state == SessionState.PAUSED:
        raise error(
            "The planner's turn is paused and waits for you: send a message (or answer its "
            "questions) to continue it."
        )


def _record(session: Session, seqs: list[int], reason: str, *, replaced_by: int | None = None) -> None:
    """The audit trail of what was superseded, and by what, in the turn that superseded it."""
    if not seqs:
        return
    data: dict[str, Any] = {"seqs": seqs, "reason": reason}
    if replaced_by is not None:
        data["replaced_by"] = replaced_by
    Event.objects.create(session=session, kind="messages_superseded", turn=session.turn_count, data=data)


def _text(content: list[dict[str, Any]]) -> str:
    return "".join(str(b.get("text", "")) for b in content if b.get("type") == "text")


def _first_words(text: str) -> str:
    """A chat's title until it is named: its first message's first words (as ``session_begin``)."""
    return " ".join(text.split())[:60]
