"""The planner's Prometheus metrics (the gateway keeps the LLM ones, the loop its compactions),
and the state of agents' questions, read from the database at each scrape
(:class:`QuestionsCollector`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import DatabaseError
from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client import Counter
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

logger = logging.getLogger(__name__)

TURNS = Counter("ballet_planner_turns_total", "Planner turns by how they ended.", ["reason"])
TOOL_CALLS = Counter("ballet_planner_tool_calls_total", "Planner tool calls.", ["tool", "outcome"])
# What waited for a free turn and failed to start for an unexpected reason (a bug, the database
# down): "question" or "session". Each is logged with its id; the pass goes on with the rest.
START_FAILURES = Counter(
    "ballet_planner_start_failures_total",
    "Waiting questions and sessions whose start failed unexpectedly.",
    ["kind"],
)


class QuestionsCollector:
    """Agents' questions by status, and how long the oldest unsettled one of each status has
    waited: one query a scrape, the same figures whichever process serves it."""

    def collect(self) -> Iterable[Metric]:
        from planner.models import Question, QuestionStatus  # noqa: PLC0415 - apps are loaded by a scrape

        try:
            rows = Question.objects.values("status").annotate(count=Count("pk"), oldest=Min("created_at"))
            by_status = {row["status"]: row for row in rows}
        except DatabaseError:  # the database is down: the processes' counts are still worth a scrape
            logger.warning("/metrics: the questions could not be counted", exc_info=True)
            return
        counts = GaugeMetricFamily("ballet_questions", "Agents' questions by status.", labels=["status"])
        ages = GaugeMetricFamily(
            "ballet_questions_oldest_age_seconds",
            "Age of the oldest question of each unsettled status (0: none).",
            labels=["status"],
        )
        now = timezone.now()
        for status in QuestionStatus.values:
            row = by_status.get(status)
            counts.add_metric([status], row["count"] if row else 0)
            if status in (QuestionStatus.OPEN, QuestionStatus.NEEDS_HUMAN):
                age = (now - row["oldest"]).total_seconds() if row else 0.0
                ages.add_metric([status], max(0.0, age))
        yield counts
        yield ages
