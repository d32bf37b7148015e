"""Celery tasks of the tracker, and their enqueueing on commit: search indexing (docs/operations.md)
and people's mail (docs/events.md#e-mail). The expiry of claims is in ``tracker/work_tasks.py``."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from celery import shared_task
from django.conf import settings

from tracker.commit_hooks import on_commit_robust
from tracker.mail import mail_send_digests, mail_send_pending, mail_sender
from tracker.search.indexing import search_index_refresh

logger = logging.getLogger(__name__)


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


@shared_task(name="tracker.send_mail", ignore_result=True)
def send_mail() -> int:
    """Send the mails waiting to go at once; beat runs it every 10 s besides."""
    return mail_send_pending()


@shared_task(name="tracker.send_digests", ignore_result=True)
def send_digests() -> int:
    """Send the daily digests if they are due (beat asks often; they go once a day)."""
    return mail_send_digests()


def mail_send_soon() -> None:
    """A commit queued mail to send at once: the embedded server's sender is woken; elsewhere the
    worker is asked (``tracker.send_mail``; a failure is logged: beat sends it within 10 s). An
    eager Celery (a command of the embedded mode, the tests) sends nothing here: it would send in
    the committing thread; the server's sender sends it when it runs."""
    if mail_sender.started:
        mail_sender.wake()
        return
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return
    try:
        send_mail.delay()
    except Exception:
        logger.warning("could not ask the worker to send mail; beat's next run sends it", exc_info=True)
