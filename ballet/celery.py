"""The Celery application: eager in the embedded mode, Redis-backed in production."""

import os

from celery import Celery
from celery.signals import worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ballet.settings.base")

app = Celery("ballet")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def _pool_process_started(**_kwargs: object) -> None:
    """A pool process is forked, not started anew: it folds the metrics files of the processes
    that are gone as every process does at its start (ballet/metrics.py)."""
    from ballet import metrics  # noqa: PLC0415 - after the settings, which set up prometheus_client

    metrics.process_started()
