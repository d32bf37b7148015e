"""The ``ballet`` app: process-level set-up that needs Django ready (metrics, deploy checks)."""

from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from prometheus_client import values

from ballet import checks, metrics


class BalletConfig(AppConfig):
    name = "ballet"
    verbose_name = "Ballet"

    def ready(self) -> None:
        checks.register()
        if settings.METRICS_DIR is not None and not getattr(values.ValueClass, "_multiprocess", False):
            raise ImproperlyConfigured(
                "prometheus_client was imported before the settings set PROMETHEUS_MULTIPROC_DIR: "
                "this process's metrics would be missing from /metrics. Import it after Django's settings."
            )
        metrics.process_started()
