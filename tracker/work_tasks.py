"""The Celery task that ends claims whose lease ran out (docs/domain.md#work).

Apart from ``tracker/tasks.py``, which the item services import for search indexing: the work
services import those. Workers load it through ``CELERY_IMPORTS``; beat runs it every 30 s
(``CELERY_BEAT_SCHEDULE``). The embedded server, which has no beat, sweeps itself
(``ballet/lifespan.py``).
"""

from __future__ import annotations

from celery import shared_task

from tracker.services.work import claims_expire


@shared_task(name="tracker.expire_claims", ignore_result=True)
def expire_claims() -> int:
    """End the claims whose lease ran out; how many."""
    return claims_expire()
