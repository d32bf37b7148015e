"""What waits for a turn's next model call: steering messages and change notes, delivered in
the step that reads them (``session_inputs``)."""

from __future__ import annotations

import uuid

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from planner.agent.messages import ChatMessage
from planner.domain.selectors import session_reader
from planner.domain.services.notes import NOTED_EVENT, notes_for, notes_summary, notes_text
from planner.domain.services.sessions.rows import append, check_current, human, waiting
from planner.models import (
    Event,
    MessageKind,
    Session,
)
from tracker.selectors import activity_since


def session_inputs(*, session_id: uuid.UUID, turn: int, focus: list[str]) -> list[tuple[ChatMessage, str]]:
    """Deliver steering and change notes: store them as messages, advance last seen.

    Returns each new message with its author's name ("" for change notes). The
    common case, nothing new, costs one read and no transaction.
    """
    if not inputs_waiting(session_id=session_id):
        return []
    return deliver_inputs(session_id=session_id, turn=turn, focus=focus)


def inputs_waiting(*, session_id: uuid.UUID) -> bool:
    """Is steering waiting, or has the organization's activity moved past what the session saw?"""
    return any(waiting(session_id))


@transaction.atomic
def deliver_inputs(*, session_id: uuid.UUID, turn: int, focus: list[str]) -> list[tuple[ChatMessage, str]]:
    """Deliver steering and change notes: store them as messages, advance last seen.

    Returns each new message with its author's name ("" for change notes).
    """
    session = Session.objects.select_for_update(of=("self",)).select_related("project").get(pk=session_id)
    check_current(session, turn)
    seen = session.last_seen_seq
    delivered = append_steering(session, turn)
    delivered += append_notes(session, turn, focus or session.focus)
    if delivered or session.last_seen_seq != seen:
        session.heartbeat_at = timezone.now()
        session.save(
            update_fields=["steering", "last_seen_seq", "last_message_seq", "heartbeat_at", "updated_at"]
        )
    return delivered


def append_notes(session: Session, turn: int, focus: list[str]) -> list[tuple[ChatMessage, str]]:
    """Store the change notes of the organization's activity since the session last looked,
    as a message of ``turn``, and move its ``last_seen_seq``. The caller saves the row."""
    events = activity_since(organization_id=session.project.organization_id, after_seq=session.last_seen_seq)
    if not events:
        return []
    session.last_seen_seq = events[-1].seq
    reader = session_reader(session=session) or session.user
    noted = notes_for(
        events, session_label=f"planner:{session.pk}", project=session.project, user=reader, focus=focus
    )
    if not noted:
        return []
    message = append(session, human(notes_text(noted), MessageKind.CHANGES), turn)
    # What the note says, in a line for the chat's readers (the transcript's ``summary``).
    summary = {"seq": message.seq, "summary": notes_summary(noted)}
    Event.objects.create(session=session, kind=NOTED_EVENT, turn=turn, data=summary)
    return [(message, "")]


def append_steering(session: Session, turn: int) -> list[tuple[ChatMessage, str]]:
    """Store the session's queued steering as its authors' messages of ``turn`` and empty the
    queue; each message with its author's name. The caller holds the row and saves it."""
    appended = []
    for item in session.steering:
        author = User.objects.filter(username=item["author"]).first()
        appended.append(
            (append(session, human(item["text"], MessageKind.STEER), turn, author), item["author"])
        )
    session.steering = []
    return appended
