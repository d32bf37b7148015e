"""Celery tasks of the tracker, and their enqueueing on commit: search indexing (docs/operations.md).
The expiry of claims is in ``tracker/work_tasks.py``."""

from __future__ import annotations

from collections.abc import Iterable

from celery import shared_task

from tracker.commit_hooks import on_commit_robust
from tracker.search.indexing import search_index_refresh


@shared_task(name="search.index", ignore_result=True)
def search_index(kind: str, ids: list[int]) -> int:
    """Write the search documents of ``ids`` of ``kind`` as the objects are now."""
    return search_index_refresh(kind=kind, ids=ids)


def search_index_enqueue(kind: str, ids: list[int]) -> None:
    """Queue :func:`search_index` for the worker (run at once in the embedded mode)."""
    search_index.delay(kind, ids)


def search_index_on_commit(kind: str, ids: Iterable[int]) -> None:
    """Index ``ids`` of ``kind`` once the current transaction commits; nothing if it rolls back.

    A failure to enqueue (the broker is down) is logged and does not fail the
    write, which has committed: ``manage.py search_backfill`` repairs the index.
    """
    on_commit_robust(search_index_enqueue, kind, sorted(set(ids)))
