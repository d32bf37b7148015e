"""Reads of work on the plan (docs/domain.md#work): claims and their reports.

Re-exported by :mod:`tracker.selectors`; REST, the MCP tools and the planner read through these.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import QuerySet

from tracker.errors import NotFoundError
from tracker.inputs import MAX_BIG_ID, ascii_number
from tracker.models import Claim, ClaimStatus, Item, Project, Report, ReportKind


def claim_list(*, project: Project, active: bool | None = None) -> QuerySet[Claim]:
    """The project's claims, newest first; ``active`` True: only those whose lease holds (status
    active), False: only ended ones, None: all."""
    qs = Claim.objects.filter(project=project).select_related("project", "item__project", "holder")
    if active is True:
        qs = qs.filter(status=ClaimStatus.ACTIVE)
    elif active is False:
        qs = qs.exclude(status=ClaimStatus.ACTIVE)
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
    """The active claim of each of ``item_ids`` that has one, by item id, in one query."""
    ids = list(set(item_ids))
    if not ids:
        return {}
    rows = Claim.objects.filter(item_id__in=ids, status=ClaimStatus.ACTIVE).select_related(
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
