"""The tracker's state in ``/metrics``, read from the database at each scrape: claims by status and
reports by kind (docs/domain.md#work)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import DatabaseError
from django.db.models import Count
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

logger = logging.getLogger(__name__)


class WorkCollector:
    """Claims by status (``active`` and each outcome) and reports by kind: two queries a scrape,
    the same figures whichever process serves it."""

    def collect(self) -> Iterable[Metric]:
        from tracker.models import Claim, ClaimStatus, Report, ReportKind  # noqa: PLC0415 - apps are loaded by a scrape

        try:
            claims = dict(Claim.objects.values_list("status").annotate(count=Count("pk")).order_by())
            reports = dict(Report.objects.values_list("kind").annotate(count=Count("pk")).order_by())
        except DatabaseError:  # the database is down: the processes' counts are still worth a scrape
            logger.warning("/metrics: the claims and reports could not be counted", exc_info=True)
            return
        by_status = GaugeMetricFamily("ballet_claims", "Claims on tickets by status.", labels=["status"])
        for status in ClaimStatus.values:
            by_status.add_metric([status], claims.get(status, 0))
        by_kind = GaugeMetricFamily("ballet_reports", "Reports on claims by kind.", labels=["kind"])
        for kind in ReportKind.values:
            by_kind.add_metric([kind], reports.get(kind, 0))
        yield by_status
        yield by_kind
