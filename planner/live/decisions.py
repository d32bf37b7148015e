"""The planner follows the tracker's decisions: a changeset a chat proposed was decided.

Connected to ``tracker.signals.changeset_decided`` when the app is ready. It runs in the
thread that decided (an admin or REST view), after the commit, and hands the
``changeset`` frame to the hub, which tells the session's watchers in every process.
"""

from __future__ import annotations

from typing import Any

from planner.domain.services.changesets import changeset_frame
from planner.live.hub import hub
from tracker.models import Changeset


def changeset_decided_receiver(sender: Any, *, changeset: Changeset, **kwargs: Any) -> None:
    """Tell the watchers of the session that proposed ``changeset`` how it was decided."""
    if changeset.planner_session is None:
        return
    hub.publish_from_sync(changeset.planner_session, [changeset_frame(changeset)])
