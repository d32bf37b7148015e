"""A new chat: ``session_create``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from planner.domain.services.sessions.rows import MAX_TITLE
from planner.models import (
    Session,
    TitleSource,
)
from tracker.errors import (
    ValidationError,
)
from tracker.inputs import refuse_nul
from tracker.models import Organization, Project
from tracker.trust.permissions import (
    PLANNER_CHAT,
    require,
)


@transaction.atomic
def session_create(
    *, user: User, project: Project, title: Any = "", parent: Session | None = None
) -> Session:
    """Open a chat session in ``project`` for ``user`` (needs ``planner.chat``)."""
    require(user, project, PLANNER_CHAT)
    refuse_nul(title=title)
    if not isinstance(title, str) or len(title) > MAX_TITLE:
        raise ValidationError({"title": [f"Expected a string of at most {MAX_TITLE} characters."]})
    if parent is not None and parent.project_id != project.pk:
        raise ValidationError({"parent": ["A sub-chat belongs to its parent's project."]})
    head = Organization.objects.values_list("activity_seq", flat=True).get(pk=project.organization_id)
    title = title.strip()
    return Session.objects.create(
        project=project,
        user=user,
        parent=parent,
        title=title,
        title_source=TitleSource.HUMAN if title else TitleSource.NONE,  # a given title is the human's
        last_seen_seq=head,
    )
