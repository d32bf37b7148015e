"""Ballet's Celery app as the live tests run it: each task that finishes says so in the log.

Django's logging keeps ``celery.app.trace`` (which reports successes) at WARNING, so
a worker started with ``-A tests.fakes.celery_app`` writes its own line per finished
task; :meth:`tests.fakes.servers.Worker.sweeps` counts them.
"""

from __future__ import annotations

import logging
from typing import Any

from celery.signals import task_postrun

from ballet.celery import app

FINISHED = "live-test task finished:"
logger = logging.getLogger("tests.worker")


@task_postrun.connect
def _finished(*, task_id: str, task: Any, state: str | None = None, **_kwargs: Any) -> None:
    logger.warning("%s %s[%s] %s", FINISHED, task.name, task_id, state)


__all__ = ["app"]
