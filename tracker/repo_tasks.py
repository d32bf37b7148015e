"""The Celery task that fetches the linked repositories' mirrors (SPEC § 16).

Workers load it through ``CELERY_IMPORTS``; it is queued, by name, when an owner links a
repository or asks for a fetch, and beat runs it every minute, which fetches whatever is due by
``[repositories] fetch_minutes``. The embedded server, which has no worker, fetches them itself
(``ballet/lifespan.py``).
"""

from __future__ import annotations

from celery import shared_task

from tracker.services.repositories import FETCH_TASK, repositories_fetch_due


@shared_task(name=FETCH_TASK, ignore_result=True)
def fetch_repositories() -> int:
    """Fetch every repository that is due; how many were fetched."""
    return repositories_fetch_due()
