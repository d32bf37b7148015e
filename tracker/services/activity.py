"""Who acts, and the activity log every write service appends to."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db.models import F

from tracker.models import ActivityEvent, Organization, Project
from tracker.services.events import events_from_activity


@dataclass(frozen=True)
class Actor:
    """A human, the planner session acting for one, or Ballet itself on a human's behalf.

    ``system`` names the mechanism that acts when no one does (``lease``: a claim's lease ran out,
    docs/domain.md#work): the label is ``ballet:lease`` and ``user`` the human it concerns.
    """

    user: User
    planner_session: uuid.UUID | None = None
    system: str | None = None

    @property
    def label(self) -> str:
        if self.system is not None:
            return f"ballet:{self.system}"
        if self.planner_session is not None:
            return f"planner:{self.planner_session}"
        return f"user:{self.user.get_username()}"

    @property
    def is_planner(self) -> bool:
        return self.planner_session is not None


def activity_record(
    *,
    actor: Actor,
    organization_id: int,
    project: Project | None,
    verb: str,
    target: str,
    data: dict[str, Any] | None = None,
) -> ActivityEvent:
    """Append one event, and the typed events it makes (``tracker/services/events.py``); call
    inside the transaction of the change it records.

    The organization row's counter is bumped with an UPDATE, which holds the
    row lock to commit, so seqs are allocated in commit order.
    """
    Organization.objects.filter(pk=organization_id).update(activity_seq=F("activity_seq") + 1)
    seq = Organization.objects.values_list("activity_seq", flat=True).get(pk=organization_id)
    activity = ActivityEvent.objects.create(
        organization_id=organization_id,
        project=project,
        seq=seq,
        actor=actor.label,
        on_behalf_of=actor.user,
        verb=verb,
        target=target,
        data=data or {},
    )
    events_from_activity(activity)
    return activity
