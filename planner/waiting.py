"""Which chats wait for a human: a pending request this user may answer (SPEC § 9, § 13.2)."""

from __future__ import annotations

from django.db.models import Exists, OuterRef, Q, QuerySet

from planner.models import HumanRequest, RequestKind, RequestStatus, Session
from tracker.models import Project
from tracker.permissions import PLANNER_CHAT, AnyUser, has_permission


def sessions_waiting(*, user: AnyUser, project: Project) -> QuerySet[Session]:
    """The sessions of ``project`` with a pending request ``user`` may answer: any request of
    their own sessions, the questions of the project's question sub-chats if they may chat."""
    if not has_permission(user, project, PLANNER_CHAT):
        return Session.objects.none()
    pending = HumanRequest.objects.filter(session=OuterRef("pk"), status=RequestStatus.PENDING)
    own = Q(user_id=user.pk) & Exists(pending)
    asked = Q(question__isnull=False) & Exists(pending.filter(kind=RequestKind.QUESTION))
    return (
        Session.objects.filter(project=project)
        .filter(own | asked)
        .select_related("project", "user", "question__asker", "question__item")
    )
