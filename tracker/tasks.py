"""Celery tasks of the tracker: search indexing (SPEC § 10)."""

from __future__ import annotations

from celery import shared_task

from tracker.search.indexing import search_index_refresh


@shared_task(name="search.index", ignore_result=True)
def search_index(kind: str, ids: list[int]) -> int:
    """Write the search documents of ``ids`` of ``kind`` as the objects are now."""
    return search_index_refresh(kind=kind, ids=ids)
