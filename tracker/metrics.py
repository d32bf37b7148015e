"""The tracker's state in ``/metrics``, read from the database at each scrape: claims by status and
reports by kind, the claims whose lease ran out that the sweep has yet to end, and how long ago
it last finished (docs/domain.md#work, docs/operations.md#metrics)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import DatabaseError
from django.db.models import Count, Q
from django.utils import timezone
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

logger = logging.getLogger(__name__)


class WorkCollector:
    """Claims by status as they read (``active``: those that hold their ticket; a lapsed lease
    counts as ``expired``), reports by kind, the lapsed claims not swept yet and the age of the
    last sweep: three queries a scrape, the same figures whichever process serves it."""

    def collect(self) -> Iterable[Metric]:
        from tracker.models import Claim, ClaimStatus, Report, ReportKind  # noqa: PLC0415 - apps are loaded by a scrape
        from tracker.selectors import lapsed, lease_sweep_finished_at  # noqa: PLC0415

        now = timezone.now()
        try:
            claims = {
                status: (count, unswept)
                for status, count, unswept in Claim.objects.values_list("status")
                .annotate(count=Count("pk"), unswept=Count("pk", filter=Q(lapsed(now))))
                .order_by()
            }
            reports = dict(Report.objects.values_list("kind").annotate(count=Count("pk")).order_by())
            swept = lease_sweep_finished_at()
        except DatabaseError:  # the database is down: the processes' counts are still worth a scrape
            logger.warning("/metrics: the claims and reports could not be counted", exc_info=True)
            return
        unswept = claims.get(ClaimStatus.ACTIVE, (0, 0))[1]
        by_status = GaugeMetricFamily("ballet_claims", "Claims on tickets by status.", labels=["status"])
        moved = {ClaimStatus.ACTIVE.value: -unswept, ClaimStatus.EXPIRED.value: unswept}
        for status in ClaimStatus.values:
            by_status.add_metric([status], claims.get(status, (0, 0))[0] + moved.get(status, 0))
        by_kind = GaugeMetricFamily("ballet_reports", "Reports on claims by kind.", labels=["kind"])
        for kind in ReportKind.values:
            by_kind.add_metric([kind], reports.get(kind, 0))
        yield by_status
        yield by_kind
        yield GaugeMetricFamily(
            "ballet_claims_lapsed",
            "Claims whose lease ran out that the sweep has yet to end (counted as expired meanwhile).",
            value=unswept,
        )
        if swept is not None:  # none before the first sweep: nothing is late yet
            yield GaugeMetricFamily(
                "ballet_lease_sweep_age_seconds",
                "Seconds since the sweep of lapsed leases last finished.",
                value=max(0.0, (now - swept).total_seconds()),
            )
