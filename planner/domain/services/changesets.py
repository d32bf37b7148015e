"""Changesets a session proposed, as they stand now: their cards in the chat follow the decision.

A changeset the planner proposes carries its session's id (``Changeset.planner_session``).
When a human applies or rejects it, or applying it conflicts — in the admin, over REST, in
any process — the tracker sends ``changeset_decided`` once the decision is committed, and
``planner/live/decisions.py`` sends :func:`changeset_frame` to the session's watchers
everywhere (docs/protocol.md). A chat opened later reads the same state from the transcript
(:func:`changesets_of`).
"""

from __future__ import annotations

import uuid
from typing import Any

from planner.agent import frames
from planner.agent.frames import ChangesetFrame
from tracker.models import Changeset
from tracker.page_links import changeset_url


def review_url(changeset: Changeset) -> str:
    """The page where a human reviews, applies or rejects ``changeset``."""
    return changeset_url(changeset.project.key, changeset.number)


def changeset_frame(changeset: Changeset) -> ChangesetFrame:
    """The ``changeset`` frame of ``changeset``'s status and decision."""
    decided_by = changeset.decided_by.get_username() if changeset.decided_by is not None else ""
    return frames.changeset(
        number=changeset.number,
        status=changeset.status,
        decided_by=decided_by,
        decided_at=changeset.decided_at.isoformat() if changeset.decided_at else None,
        note=changeset.decision_note,
        reason=changeset.conflict_reason,
    )


def changesets_of(*, project_id: int, session_id: uuid.UUID) -> list[dict[str, Any]]:
    """The changesets the session proposed, by number, as they stand now."""
    rows = Changeset.objects.filter(project_id=project_id, planner_session=session_id).select_related(
        "project", "decided_by"
    )
    out: list[dict[str, Any]] = []
    for changeset in rows.order_by("number"):
        state: dict[str, Any] = {k: v for k, v in changeset_frame(changeset).items() if k != "type"}
        out.append({**state, "title": changeset.title, "review_url": review_url(changeset)})
    return out
