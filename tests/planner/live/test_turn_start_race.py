"""Two messages starting turns in one project at once: the project's row lock makes the second
count the first's turn, so the last place under the project's limit goes to one of them only
(docs/trust.md#limits). The lock is sent in one round trip with the count (tracker/db/sql.py,
``batched``): it must still be taken before the count runs."""

from __future__ import annotations

import threading

import pytest
from django.conf import settings
from django.db import connections, transaction

from planner.domain.services.sessions import TurnsFullError, rows, session_begin, session_create
from planner.models import Session, SessionState

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not settings.PRODUCTION_MODE, reason="SQLite takes the database's write lock first"),
]


def test_a_turn_start_waits_for_the_project_lock_and_counts_the_turn_that_held_it(
    limits, chat_project, member, maintainer
):
    limits(running_turns_per_project=1)
    first = session_create(user=member, project=chat_project)
    second = session_create(user=maintainer, project=chat_project)
    holding, release = threading.Event(), threading.Event()
    outcome: list[object] = []

    def start_first() -> None:
        """Counts with the project's row locked, then takes the place, while the second waits."""
        try:
            with transaction.atomic():
                session = Session.objects.select_related("project").get(pk=first.pk)
                rows.turns_limit_check(session, member, settings.BALLET_LIMITS)
                holding.set()
                release.wait(timeout=10)
                Session.objects.filter(pk=first.pk).update(state=SessionState.RUNNING, turn_owner="elsewhere")
        finally:
            connections.close_all()

    def start_second() -> None:
        try:
            outcome.append(session_begin(session_id=second.pk, user=maintainer, text="Plan the beta"))
        except TurnsFullError as exc:
            outcome.append(exc)
        finally:
            connections.close_all()

    holder = threading.Thread(target=start_first)
    holder.start()
    assert holding.wait(timeout=10)
    waiter = threading.Thread(target=start_second)
    waiter.start()
    waiter.join(timeout=1)
    waited = waiter.is_alive()  # blocked on the project's row
    release.set()
    holder.join(timeout=10)
    waiter.join(timeout=10)

    assert waited
    (refused,) = outcome
    assert isinstance(refused, TurnsFullError)
    assert "turns are already running in BAL" in str(refused)
    assert Session.objects.get(pk=second.pk).state == SessionState.IDLE
