"""Knowledge drafts from a compaction's summary (SPEC § 6.4, docs/domain.md#drafts).

After a compaction, the summary's durable parts (``planner/agent/summary_parts.py``: the goal,
decisions, constraints, open questions) become drafts for the session's owner, linked to the
items of the session's project they name. A draft is not knowledge: nothing but its owner's
chat and ``planner/sessions/{id}/drafts/`` shows it. The owner publishes it (an ordinary entry,
written as ``planner:SESSION`` acting for them, linked to the project and those items) or
discards it. A later compaction's part of the same section replaces a draft still pending (its
summary covers the earlier one), and a part its owner already published word for word is not
drafted again.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from knowledge.services import knowledge_create
from planner.agent import frames
from planner.agent.frames import KnowledgeDraftFrame
from planner.agent.summary_parts import durable_parts
from planner.models import DraftStatus, KnowledgeDraft, Session
from tracker.db.locks import locked
from tracker.errors import ConflictError, NotFoundError
from tracker.page_links import knowledge_url
from tracker.selectors import items_found_by_keys
from tracker.services.activity import Actor
from tracker.trust.permissions import KNOWLEDGE_WRITE, has_permission, visible_projects

DRAFTS_PER_COMPACTION = 4  # one per section


def drafts_from_summary(session: Session, *, summary: str, up_to: int) -> int:
    """Draft the summary's durable parts for ``session``'s owner; how many drafts it left.

    None in a question's sub-chat (its owner is the asking agent, and what it says is the
    project's members'), nor for an owner who may not write knowledge in the project.
    """
    if session.question_id is not None:
        return 0
    owner = User.objects.get(pk=session.user_id)
    if not has_permission(owner, session.project_id, KNOWLEDGE_WRITE):
        return 0
    parts = durable_parts(summary, chat_title=session.title)[:DRAFTS_PER_COMPACTION]
    keys = {key for part in parts for key in part.item_keys}
    named = items_found_by_keys(user=owner, keys=keys)
    count = 0
    for part in parts:
        known = list(KnowledgeDraft.objects.filter(session=session, section=part.section).order_by("-pk"))
        if any(d.status == DraftStatus.PUBLISHED and d.body == part.body for d in known):
            continue
        draft = next((d for d in known if d.status == DraftStatus.PENDING), None)
        if draft is None:
            draft = KnowledgeDraft(session=session, section=part.section)
        draft.summary_up_to = up_to
        draft.kind, draft.title, draft.body = part.kind, part.title, part.body
        draft.save()
        draft.items.set(
            [named[k] for k in part.item_keys if k in named and named[k].project_id == session.project_id]
        )
        count += 1
    return count


def _owned(*, session_id: uuid.UUID, user: User) -> Session:
    """The caller's own session, in a project they may still read; to anyone else (an owner
    removed from the project too) its drafts do not exist."""
    readable = Session.objects.filter(pk=session_id, project__in=visible_projects(user))
    session = readable.select_related("project").first()
    if session is None or session.user_id != user.pk:
        raise NotFoundError("Session not found.")
    return session


def draft_row(draft: KnowledgeDraft) -> dict[str, Any]:
    """A draft as the chat and ``planner/sessions/{id}/drafts/`` show it."""
    return {
        "id": draft.pk,
        "section": draft.section,
        "kind": draft.kind,
        "title": draft.title,
        "body": draft.body,
        "items": sorted(item.key for item in draft.items.all()),
        "status": draft.status,
        "entry": draft.entry_id,
        "url": _url(draft),
        "summary_up_to": draft.summary_up_to,
        "created_at": draft.created_at,
        "decided_at": draft.decided_at,
    }


def drafts_of(*, session: Session, user: User) -> list[dict[str, Any]]:
    """The drafts of ``session`` as its owner sees them (anyone else: none), oldest first."""
    if session.user_id != user.pk:
        return []
    drafts = KnowledgeDraft.objects.filter(session=session).select_related("session__project")
    drafts = drafts.prefetch_related("items__project")
    return [draft_row(draft) for draft in drafts]


def draft_list(*, session_id: uuid.UUID, user: User) -> list[dict[str, Any]]:
    return drafts_of(session=_owned(session_id=session_id, user=user), user=user)


def _pending(session: Session, draft_id: int) -> KnowledgeDraft:
    draft = locked(KnowledgeDraft.objects.filter(pk=draft_id, session=session)).first()
    if draft is None:
        raise NotFoundError("Draft not found.")
    if draft.status != DraftStatus.PENDING:
        raise ConflictError(f"This draft was {draft.status} already.", current=draft_row(draft))
    return draft


def _url(draft: KnowledgeDraft) -> str | None:
    return knowledge_url(draft.session.project.key, draft.entry_id) if draft.entry_id else None


def draft_frame(draft: KnowledgeDraft) -> KnowledgeDraftFrame:
    return frames.knowledge_draft(id=draft.pk, status=draft.status, entry=draft.entry_id, url=_url(draft))


@transaction.atomic
def draft_publish(
    *, session_id: uuid.UUID, draft_id: int, user: User, changes: dict[str, Any] | None = None
) -> KnowledgeDraft:
    """Publish the draft as an ordinary knowledge entry, with the owner's ``changes`` (kind,
    title, body) if any; it needs knowledge.write in the project now, as any write does."""
    session = _owned(session_id=session_id, user=user)
    draft = _pending(session, draft_id)
    fields = {"kind": draft.kind, "title": draft.title, "body": draft.body, **(changes or {})}
    readable = items_found_by_keys(user=user, keys=[item.key for item in draft.items.all()])
    items = [item for item in readable.values() if item.project_id == session.project_id]
    entry = knowledge_create(
        actor=Actor(user=user, planner_session=session.pk),
        kind=fields["kind"],
        title=fields["title"],
        body=fields["body"],
        projects=[session.project],
        items=items,
    )
    draft.status, draft.entry, draft.decided_at = DraftStatus.PUBLISHED, entry, timezone.now()
    draft.kind, draft.title, draft.body = entry.kind, entry.title, entry.body
    draft.save(update_fields=["status", "entry", "decided_at", "kind", "title", "body"])
    return draft


@transaction.atomic
def draft_discard(*, session_id: uuid.UUID, draft_id: int, user: User) -> KnowledgeDraft:
    """Discard the draft: it stays listed as discarded, and is never knowledge."""
    session = _owned(session_id=session_id, user=user)
    draft = _pending(session, draft_id)
    draft.status, draft.decided_at = DraftStatus.DISCARDED, timezone.now()
    draft.save(update_fields=["status", "decided_at"])
    return draft
