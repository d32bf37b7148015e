"""Reads of work on the plan (docs/domain.md#work): claims and their reports, and when the sweep of
lapsed leases last ran.

A claim **holds** its ticket while it is active and its lease has not run out. One whose lease
ran out holds nothing, whether or not the sweep (``claims_expire``) has ended it yet: every read
counts it as expired, as the sweep will leave it. :func:`held` and :func:`lapsed` say so for the
ORM, ``tracker/db/plan_rows.py``'s ``held_sql`` and ``lapsed_sql`` for the hand-written SQL of the hot path
(``tracker/db/plan_rows.py``), :func:`claim_as_read` for one claim in hand.

Re-exported by :mod:`tracker.selectors`; REST, the MCP tools and the planner read through these.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from django.db.models import Count, Min, Q, QuerySet
from django.utils import timezone

from tracker.errors import NotFoundError
from tracker.inputs import MAX_BIG_ID, ascii_number
from tracker.models import Claim, ClaimStatus, Item, Project, Report, ReportKind, Sweep

LEASE_SWEEP: Final = "leases"  # the Sweep row of claims_expire
# A sweep runs every 30 s: one that has not finished for ten times that is not running (/healthz).
SWEEP_OVERDUE: Final = timedelta(minutes=5)


def held(now: datetime) -> Q:
    """Claims that hold their ticket at ``now``: active, the lease not run out."""
    return Q(status=ClaimStatus.ACTIVE, expires_at__gt=now)


def lapsed(now: datetime) -> Q:
    """Claims still active whose lease ran out by ``now``: the sweep has yet to end them."""
    return Q(status=ClaimStatus.ACTIVE, expires_at__lte=now)


def utc_minute(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%H:%M UTC")


def lease_ran_out(claim: Claim) -> str:
    """Why an expired claim ended: "the lease ran out at 12:30 UTC (no heartbeat or report for 30
    minutes)"."""
    minutes = round((claim.expires_at - claim.renewed_at).total_seconds() / 60)
    return (
        f"the lease ran out at {utc_minute(claim.expires_at)} (no heartbeat or report for {minutes} minutes)"
    )


def claim_as_read(claim: Claim, now: datetime | None = None) -> Claim:
    """``claim`` as it reads at ``now`` (default: now): itself, or, if its lease ran out unswept, an
    unsaved copy as the sweep will leave it: expired when the lease ran out, saying why."""
    if claim.status != ClaimStatus.ACTIVE or claim.expires_at > (now or timezone.now()):
        return claim
    shown = copy.copy(claim)
    shown.status, shown.ended_at = ClaimStatus.EXPIRED, claim.expires_at
    shown.end_reason = lease_ran_out(claim)
    return shown


def claim_list(*, project: Project, active: bool | None = None) -> QuerySet[Claim]:
    """The project's claims, newest first; ``active`` True: only those that hold their ticket
    (:func:`held`), False: only ended ones (a lapsed lease has ended, swept or not), None: all."""
    qs = Claim.objects.filter(project=project).select_related("project", "item__project", "holder")
    if active is True:
        qs = qs.filter(held(timezone.now()))
    elif active is False:
        qs = qs.exclude(held(timezone.now()))
    return qs.order_by("-created_at", "-pk")


def _claim_number(claim_id: Any) -> int | None:
    if isinstance(claim_id, bool):
        return None
    if isinstance(claim_id, int):
        return claim_id if 0 < claim_id <= MAX_BIG_ID else None
    if isinstance(claim_id, str):
        return ascii_number(claim_id, maximum=MAX_BIG_ID)
    return None


def claim_get(*, project: Project, claim_id: Any) -> Claim:
    """The claim ``claim_id`` of ``project``; NotFoundError for an unknown id, another project's
    claim, or anything that is not an id (``"7x"``, ``-1``, ``None``)."""
    number = _claim_number(claim_id)
    found = claim_list(project=project).filter(pk=number).first() if number is not None else None
    if found is None:
        shown = str(claim_id).replace("\x00", "\\u0000")[:40]
        raise NotFoundError(f"Claim {shown} not found.")
    return found


def claims_active_by_item(*, item_ids: Iterable[int]) -> dict[int, Claim]:
    """The claim holding each of ``item_ids`` that one holds (:func:`held`), by item id, in one query."""
    ids = list(set(item_ids))
    if not ids:
        return {}
    rows = Claim.objects.filter(held(timezone.now()), item_id__in=ids).select_related(
        "project", "item__project", "holder"
    )
    return {claim.item_id: claim for claim in rows}


def reports_of(*, claim: Claim) -> list[Report]:
    """The claim's reports, oldest first."""
    return list(
        Report.objects.filter(claim_id=claim.pk)
        .select_related("author", "item__project")
        .order_by("created_at", "pk")
    )


def reports_on(*, item: Item, limit: int) -> list[Report]:
    """The newest ``limit`` reports on ``item``, whichever claim they were made under, newest first."""
    rows = Report.objects.filter(item=item).select_related("author", "item__project")
    return list(rows.order_by("-created_at", "-pk")[:limit])


def final_reports(*, item_ids: Iterable[int]) -> dict[int, Report]:
    """Each ticket's latest ``done`` report, by item id, in one query (tickets without one are left out)."""
    ids = list(set(item_ids))
    if not ids:
        return {}
    rows = (
        Report.objects.filter(item_id__in=ids, kind=ReportKind.DONE)
        .select_related("author", "item__project", "claim")
        .order_by("item_id", "-created_at", "-pk")
    )
    latest: dict[int, Report] = {}
    for report in rows:
        latest.setdefault(report.item_id, report)
    return latest


# --- the sweep of lapsed leases, as /metrics and /healthz read it ---------------------------------


def lease_sweep_finished_at() -> datetime | None:
    """When ``claims_expire`` last finished, in any process; None if it never has."""
    return Sweep.objects.filter(name=LEASE_SWEEP).values_list("finished_at", flat=True).first()


@dataclass(frozen=True)
class Lapsed:
    """The claims whose lease ran out that the sweep has yet to end, and the earliest lapse."""

    count: int
    since: datetime | None


def claims_lapsed(*, now: datetime) -> Lapsed:
    """How many claims are still active though their lease ran out by ``now``, and since when."""
    found = Claim.objects.filter(lapsed(now)).aggregate(count=Count("pk"), since=Min("expires_at"))
    return Lapsed(count=found["count"], since=found["since"])


def lease_sweep_overdue(*, now: datetime) -> str | None:
    """What is wrong with the sweep of lapsed leases at ``now``, in words; None if nothing is.

    Overdue: its last run finished more than :data:`SWEEP_OVERDUE` ago; or it never ran (a new
    deployment, or beat never started) and a lease ran out longer ago than that. A deployment
    that has not swept yet and has no lease waiting for it is not overdue."""
    finished = lease_sweep_finished_at()
    waiting = claims_lapsed(now=now)
    if finished is not None and now - finished > SWEEP_OVERDUE:
        said = f"The sweep of lapsed leases last finished {_ago(now - finished)} ago"
    elif finished is None and waiting.since is not None and now - waiting.since > SWEEP_OVERDUE:
        said = f"No sweep of lapsed leases has finished, and a lease ran out {_ago(now - waiting.since)} ago"
    else:
        return None
    if waiting.count == 1:
        said += "; 1 claim whose lease ran out still waits for it (every read counts it as expired)"
    elif waiting.count:
        said += (
            f"; {waiting.count} claims whose lease ran out still wait for it "
            "(every read counts them as expired)"
        )
    return said + "."


def _ago(elapsed: timedelta) -> str:
    minutes = int(elapsed.total_seconds() // 60)
    if minutes < 120:
        return f"{minutes} minutes"
    return f"{minutes // 60} hours"
