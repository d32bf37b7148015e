"""Sub-chats that wait (docs/domain.md#sub-chats): those whose first turn the running-turn limits
hold back, started by a pass over the work waiting for a free turn (:func:`subchats_waiting`,
``planner/live/waiting.py``), and those whose process died mid-turn, whose parents the sweep tells
(:func:`subchats_recovered`): a parent never waits for a sub-chat that will not end.

Each runs on the database threads and returns plain data (docs/architecture.md#one-bridge).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from planner.agent.frames import Frame
from planner.domain.services import human_requests
from planner.domain.services.sessions import Recovered
from planner.models import HumanRequest, RequestKind, RequestStatus, Session, SessionState

PROCESS_DIED = "the sub-chat's process died mid-turn; its turn was recovered."


def subchats_waiting(*, limit: int = 100) -> list[tuple[uuid.UUID, int, int]]:
    """Sub-chats whose parent's paused turn waits for them and whose first turn has not started
    (the running-turn limits held it), the longest waiting first: (id, owner, project)."""
    pending = HumanRequest.objects.filter(kind=RequestKind.SUBCHAT, status=RequestStatus.PENDING)
    asked = pending.order_by("created_at", "tool_use_id").values_list("input", flat=True)[: limit * 4]
    order = [str(body.get("session")) for body in asked if isinstance(body, dict) and body.get("session")]
    rank = {child: at for at, child in enumerate(order)}
    fresh = Session.objects.filter(
        pk__in=list(rank), parent__isnull=False, turn_count=0, state=SessionState.IDLE
    ).values_list("pk", "user_id", "project_id")
    return sorted(fresh, key=lambda row: rank[str(row[0])])[:limit]


@dataclass(frozen=True)
class ParentTold:
    """A parent whose sub-chat's dead turn was recovered: what its watchers hear, and whether its
    turn now waits to resume (every sub-chat of the round has ended)."""

    parent_id: uuid.UUID
    frames: list[Frame]
    resume_waiting: bool


def subchats_recovered(recovered: Iterable[Recovered]) -> list[ParentTold]:
    """Of the sessions the sweep recovered, tell the parent of each sub-chat: its request is
    answered, failed (:data:`PROCESS_DIED`), and a parent none of whose requests is pending waits
    for a pass over the work waiting to resume it, in a process with an event loop (the sweep has
    none). Then any parent still waiting for a sub-chat that has ended (the process that ended or
    recovered it died before telling it) is told what it answered, the same way."""
    told = [
        parent
        for found in recovered
        if found.parent_id is not None
        and (parent := _tell(found.session_id, found.parent_id, PROCESS_DIED)) is not None
    ]
    for child_id, parent_id in _ended_untold():
        parent = _tell(child_id, parent_id, None)
        if parent is not None:
            told.append(parent)
    return told


def _tell(child_id: uuid.UUID, parent_id: uuid.UUID, failed: str | None) -> ParentTold | None:
    settled = human_requests.subchat_ended(session_id=child_id, failed=failed, resume=False)
    if settled is None:
        return None
    waits = Session.objects.filter(pk=parent_id, resume_waiting=True).exists()
    return ParentTold(parent_id, settled.frames, waits)


def _ended_untold(limit: int = 100) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Sub-chats whose turn has ended (idle after a turn) while a paused parent's request still
    waits for them: (sub-chat, parent)."""
    pending = HumanRequest.objects.filter(
        kind=RequestKind.SUBCHAT, status=RequestStatus.PENDING, session__state=SessionState.PAUSED
    )
    asked = pending.values_list("input", flat=True)[: limit * 4]
    ids = [str(body.get("session")) for body in asked if isinstance(body, dict) and body.get("session")]
    ended = Session.objects.filter(
        pk__in=ids, parent__isnull=False, state=SessionState.IDLE, turn_count__gt=0
    ).values_list("pk", "parent_id")
    return [(child, parent) for child, parent in ended[:limit] if parent is not None]
