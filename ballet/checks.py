"""System checks of a deployment (``manage.py check --deploy``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks


def metrics_shared(app_configs: Any = None, **_kwargs: Any) -> list[checks.CheckMessage]:
    """Production mode runs several processes: /metrics adds them up only with a shared directory."""
    if settings.PRODUCTION_MODE and settings.METRICS_DIR is None:
        return [
            checks.Warning(
                "BALLET_METRICS_DIR is not set: /metrics shows only the counts of the process that "
                "answers the scrape.",
                hint="Set it to a directory on local disk shared by the host's daphne processes and "
                "Celery workers (docs/operations.md, Metrics).",
                id="ballet.W001",
            )
        ]
    return []


def register() -> None:
    checks.register(metrics_shared, "ballet", deploy=True)
