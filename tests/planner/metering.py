"""Usage records as the gateway's metering stores them, at a chosen time, for usage and spend tests."""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils import timezone

from planner.agent.calls import CallRecord
from planner.agent.messages import Usage
from planner.domain.services.sessions import usage_save
from planner.models import UsageRecord


def metered(
    project,
    *,
    tokens: tuple[int, ...],
    at: datetime | None = None,
    model: str = "claude-sonnet-5-5",
    purpose: str = "turn",
    outcome: str = "ok",
    session=None,
) -> UsageRecord:
    """One metered call of ``project``: ``tokens`` are input, output[, cache write, cache read]."""
    record = CallRecord(purpose, model, Usage(*tokens), 1.0, outcome)
    usage_save(project_id=project.pk, session_id=session.pk if session else None, record=record)
    saved = UsageRecord.objects.latest("pk")
    if at is not None:
        UsageRecord.objects.filter(pk=saved.pk).update(created_at=at)
        saved.refresh_from_db()
    return saved


def midnight() -> datetime:
    """00:00 UTC today."""
    return timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
