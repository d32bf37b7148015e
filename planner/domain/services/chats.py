"""Naming and archiving chats (docs/protocol.md): the owner renames, archives or unarchives, the
planner proposes.

A chat's title has a source: none (the first words of its first message, set when
the first turn starts), ``human`` (given at creation or by a rename) or ``planner``
(proposed after the first turn, ``planner/live/titles.py``). A human's title is never
replaced by a proposal: the proposal is stored with one conditional UPDATE, so a
rename that lands while the title call is in flight wins.

Archiving hides a chat from every list; its transcript stays readable by its URL
and over REST (the audit trail), and it takes no more messages. Unarchiving undoes it.
"""

from __future__ import annotations

import unicodedata
import uuid
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from planner.domain.services.sessions import MAX_TITLE
from planner.models import HumanRequest, RequestStatus, Session, SessionState, TitleSource
from tracker.db.locks import locked as row_locked
from tracker.errors import InvalidStateError, NotFoundError, ValidationError
from tracker.inputs import one_line
from tracker.trust.permissions import PLANNER_CHAT, require

PROPOSED_TITLE_CHARS = 80  # a proposal is a heading, not a paragraph
_QUOTES = "\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb*_#"  # quotes, guillemets, Markdown marks


def _is_control(char: str) -> bool:
    """Control, format and unassigned characters, and line or paragraph separators."""
    return unicodedata.category(char)[0] == "C" or unicodedata.category(char) in ("Zl", "Zp")


def human_title(value: Any) -> str:
    """A title a human typed, stripped; a ValidationError on ``title`` unless 1..200 characters
    of text without control characters."""
    if not isinstance(value, str):
        raise ValidationError({"title": ["Expected a string."]})
    title = value.strip()
    if not title:
        raise ValidationError({"title": ["Write a title."]})
    if len(title) > MAX_TITLE:
        raise ValidationError({"title": [f"At most {MAX_TITLE} characters."]})
    if any(_is_control(c) for c in title):
        raise ValidationError({"title": ["A title is one line without control characters."]})
    return title


def proposed_title(text: str) -> str | None:
    """The model's answer made fit to be a title, or None if nothing is left: untrusted text, so
    its first non-empty line only, control characters removed, whitespace collapsed, a
    ``Title:`` label and surrounding quotes trimmed, cut to :data:`PROPOSED_TITLE_CHARS`."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = "".join(" " if _is_control(c) else c for c in line)
    line = " ".join(line.split())
    if line.lower().startswith("title:"):
        line = line[len("title:") :]
    line = line.strip().strip(_QUOTES).strip().rstrip(".").strip()
    return one_line(line, PROPOSED_TITLE_CHARS) or None


def _owned(session_id: uuid.UUID, user: User) -> Session:
    """The session, locked, for its owner with ``planner.chat``; everyone else: not found."""
    session = row_locked(Session.objects.select_related("project")).filter(pk=session_id).first()
    if session is None or session.user_id != user.pk:
        raise NotFoundError("Session not found.")
    require(user, session.project, PLANNER_CHAT)
    return session


@transaction.atomic
def session_rename(*, session_id: uuid.UUID, user: User, title: Any) -> Session:
    """Name the chat (its owner only); the planner never renames it after this."""
    clean = human_title(title)
    session = _owned(session_id, user)
    session.title = clean
    session.title_source = TitleSource.HUMAN
    session.save(update_fields=["title", "title_source", "updated_at"])
    return session


@transaction.atomic
def session_archive(*, session_id: uuid.UUID, user: User) -> Session:
    """Archive the chat (its owner only): hidden from lists, transcript kept. Archiving an
    archived chat changes nothing. A running turn or a request waiting for an answer must end
    first: an archived chat takes no more messages or answers."""
    session = _owned(session_id, user)
    if session.archived_at is not None:
        return session
    if session.state == SessionState.RUNNING:
        raise InvalidStateError("The planner is working in this chat: stop its turn before archiving it.")
    if HumanRequest.objects.filter(session=session, status=RequestStatus.PENDING).exists():
        raise InvalidStateError("The planner waits for an answer in this chat: answer it before archiving.")
    session.archived_at = timezone.now()
    session.save(update_fields=["archived_at", "updated_at"])
    return session


@transaction.atomic
def session_unarchive(*, session_id: uuid.UUID, user: User) -> Session:
    """Bring an archived chat back (its owner only): listed again, and it takes messages again.
    Unarchiving a chat that is not archived changes nothing."""
    session = _owned(session_id, user)
    if session.archived_at is None:
        return session
    session.archived_at = None
    session.save(update_fields=["archived_at", "updated_at"])
    return session


def title_propose(*, session_id: uuid.UUID, title: str) -> bool:
    """Store the planner's ``title`` unless someone named the chat meanwhile; True if stored.

    One conditional UPDATE: a human title saved while the title call was in flight stays.
    The chat's place in the lists (``updated_at``) does not move for it.
    """
    stored = Session.objects.filter(pk=session_id, title_source=TitleSource.NONE).update(
        title=title, title_source=TitleSource.PLANNER
    )
    return stored == 1
