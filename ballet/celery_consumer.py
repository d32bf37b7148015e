"""The worker's consumer (``CELERY_WORKER_CONSUMER``): Celery's own, surviving a lost Redis that
finds it holding tasks it fetched and has not started.

Why. With Celery 5.7.0 and kombu 5.7.0 (redis-py 8.1) a broker connection lost after the worker
connected goes through ``celery.worker.consumer.Consumer.on_connection_error_after_connected``:
it calls ``connection.collect()``, which lets go of the kombu Redis transport (its ``client``
becomes ``None``) without closing the default channel (the channel's close fails first, reading
the dead socket of its pending ``BRPOP``), then ``ignore_errors(connection, connection.close)``,
new in Celery 5.7 (5.6.3 stopped at ``collect``). That close reaches the channel again:
``kombu/transport/virtual/base.py`` ``Channel.close`` → ``QoS.restore_unacked_once`` →
``kombu/transport/redis.py`` ``QoS.restore_unacked``, which puts the fetched, unstarted tasks back
through a new client whose ``_connparams`` read ``conninfo.hostname`` on the ``None`` client. The
``AttributeError`` is no connection error, so ``ignore_errors`` lets it through and the worker
stops (``Unrecoverable error: AttributeError(... 'hostname')``): nothing is sent until it is
restarted. With no task fetched and waiting there is nothing to put back and nothing fails.
Celery 5.7.0 and kombu 5.7.0 are the newest releases, so no pin avoids it.

The fix. The broken connection's close tolerates that ``AttributeError`` and says so; the rest of
Celery's reconnect (cancelling, prefetch reduction, ``on_close``, the blueprint's restart) runs
as usual. The fetched tasks are not put back, as with Celery 5.6: Redis keeps them in its own
unacked set when it survived (kombu restores them after its visibility timeout), and a Redis that
came back empty lost them anyway. No work is lost with them: Ballet's tasks are triggers whose
work is in the database. Beat sends the sweeps again within seconds (webhook deliveries and mail
wait in their outboxes, docs/events.md), and a search indexing dropped is what ``manage.py
search_backfill`` redoes after an outage, as for one that could not be queued
(docs/operations.md#a-redis-outage).
``tests/e2e/test_worker_redis_loss.py`` checks it against real processes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer

logger = logging.getLogger(__name__)


class Consumer(CeleryConsumer):
    """Celery's consumer whose lost broker connection closes without stopping the worker."""

    def on_connection_error_after_connected(self, exc: Exception) -> None:
        connection = self.connection
        if connection is not None:
            # Celery's method closes what ``self.connection.close`` is when it gets there (after
            # ``collect``): an attribute of this one connection, which Celery discards next.
            connection.close = _tolerant_close(connection.close)  # type: ignore[method-assign]
        super().on_connection_error_after_connected(exc)


def _tolerant_close(close: Callable[[], Any]) -> Callable[[], None]:
    """``close`` of a lost connection, logging instead of raising the ``AttributeError`` of its
    collected transport (the module's docstring)."""

    def close_lost_connection() -> None:
        try:
            close()
        except AttributeError as error:
            logger.warning(
                "The broker connection was lost: the tasks the worker had fetched and not started "
                "could not be put back (%r). They are triggers: the database still holds their "
                "work, beat sends the sweeps again and manage.py search_backfill redoes indexing.",
                error,
            )

    return close_lost_connection
