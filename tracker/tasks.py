"""Celery tasks of the tracker, and their enqueueing on commit: search indexing (docs/operations.md);
the expiry of claims whose lease ran out (docs/domain.md#work)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from celery import shared_task
from django.db import transaction

from tracker.search.indexing import search_index_refresh


@shared_task(name="search.index", ignore_result=True)
def search_index(kind: str, ids: list[int]) -> int:
    """Write the search documents of ``ids`` of ``kind`` as the objects are now."""
    return search_index_refresh(kind=kind, ids=ids)


def search_index_on_commit(kind: str, ids: Iterable[int]) -> None:
    """Index ``ids`` of ``kind`` once the current transaction commits; nothing if it rolls back.

    A failure to enqueue (the broker is down) is logged and does not fail the
    write, which has committed: ``manage.py search_backfill`` repairs the index.
    """
    batch = sorted(set(ids))
    transaction.on_commit(partial(search_index.delay, kind, batch), robust=True)


@shared_task(name="tracker.expire_claims", ignore_result=True)
def expire_claims() -> int:
    """End the claims whose lease ran out (Celery beat runs it every 30 s; the embedded server,
    which has no beat, runs the same sweep itself: ``ballet/lifespan.py``)."""
    # The work services import the item services, which import this module for search indexing.
    from tracker.services.work import claims_expire  # noqa: PLC0415

    return claims_expire()
