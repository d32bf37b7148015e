"""The Celery task that sends the webhooks' due deliveries (docs/events.md#webhooks).

Apart from ``tracker/tasks.py``, which the item services import for search indexing: this imports
the webhook services, which the events of those same services reach. Workers load it through
``CELERY_IMPORTS``; it is queued, by name, when deliveries commit, and beat runs it every 5 s as
well, so a publish lost to a Redis outage only delays them. The embedded server, which has no
worker, sends them itself (``ballet/lifespan.py``).
"""

from __future__ import annotations

from celery import shared_task

from tracker.services.webhooks import DELIVER_TASK, deliveries_send


@shared_task(name=DELIVER_TASK, ignore_result=True)
def deliver_webhooks() -> int:
    """Send every due delivery (endpoints at once, each in order); how many were delivered."""
    return deliveries_send().delivered
