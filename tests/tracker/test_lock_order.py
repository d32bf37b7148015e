"""Row locks in one order (docs/architecture.md#row-locks): writers meeting in a project wait for one
another and never deadlock.

Each test holds one transaction open in a thread at the point where the soak (``bench/soak.py``)
met the deadlock, lets a second writer run into it in another thread until PostgreSQL shows it
waiting on a lock, then lets the first go on. Before the locks were taken in one order, PostgreSQL
broke each of these cycles after its ``deadlock_timeout`` and one writer answered 503; now the
second waits for the first and both commit.

PostgreSQL only: SQLite takes one writer at a time, so nothing there waits on a row.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection, connections, transaction

from planner.domain.services.agent_questions import question_create
from planner.models import Question
from tests.fakes.servers import production_mode
from tracker.models import Changeset, Claim, Item, Project
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_apply, changeset_propose
from tracker.services.work import claim_take

WAIT = 30.0  # seconds any step may take before the test gives up on it

pytestmark = [
    pytest.mark.skipif(not production_mode(), reason="only PostgreSQL locks rows; SQLite locks it all"),
    pytest.mark.django_db(transaction=True),
]


class Writers:
    """Two writers in threads of their own, each on its own connection; what each raised."""

    def __init__(self) -> None:
        self.errors: dict[str, BaseException] = {}
        self.pids: dict[str, int] = {}
        self.threads: list[threading.Thread] = []

    def start(self, name: str, write: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_backend_pid()")
                    self.pids[name] = cursor.fetchone()[0]
                write()
            except BaseException as exc:
                self.errors[name] = exc
            finally:
                connections.close_all()

        thread = threading.Thread(target=run, name=name)
        self.threads.append(thread)
        thread.start()

    def wait_blocked(self, name: str) -> None:
        """Until ``name``'s connection waits on a lock another transaction holds."""
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if name in self.errors:
                raise AssertionError(f"{name} failed before it waited: {self.errors[name]!r}")
            pid = self.pids.get(name)
            if pid is not None:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
                    row = cursor.fetchone()
                if row is not None and row[0] == "Lock":
                    return
            time.sleep(0.02)
        raise AssertionError(f"{name} never waited on a lock")

    def join(self) -> dict[str, str]:
        for thread in self.threads:
            thread.join(timeout=WAIT)
            assert not thread.is_alive(), f"{thread.name} is still running"
        return {name: repr(error) for name, error in self.errors.items()}


@contextmanager
def held_open(ready: threading.Event, go: threading.Event) -> Iterator[None]:
    """A transaction that, once its body has run, waits for ``go`` before it commits."""
    with transaction.atomic():
        yield
        ready.set()
        assert go.wait(WAIT), "never let go"


@pytest.fixture
def tickets(make_item) -> list[Item]:
    return [make_item(title=f"Ticket {n}", state="ready") for n in range(3)]


def asked_held_open(writers: Writers, user: Any, project: Project) -> threading.Event:
    """``user`` asks a question in a transaction left open: its rows written, the organization's
    row locked for the activity log, the foreign keys to the project checked at commit. Set the
    event returned to commit it."""
    ready, go = threading.Event(), threading.Event()

    def ask() -> None:
        with held_open(ready, go):
            question_create(user=user, project=project, text="Which columns go in the export?")

    writers.start("question", ask)
    assert ready.wait(WAIT), "the question was never asked"
    return go


def test_a_claim_while_a_question_is_asked(tickets, member, maintainer, project):
    """The soak's deadlock: a claim locked its ticket with the project and the organization it
    joins, and waited on the organization's row a question held for the activity log; the
    question, at commit, waited on the project's row to check its foreign keys."""
    writers = Writers()
    go = asked_held_open(writers, member, project)

    writers.start("claim", lambda: claim_take(actor=Actor(user=maintainer), project=project, item=tickets[0]))
    writers.wait_blocked("claim")
    go.set()

    assert writers.join() == {}
    assert list(Claim.objects.values_list("item__title", "holder__username")) == [("Ticket 0", "maintainer")]
    assert Question.objects.count() == 1


def test_a_changeset_applied_while_a_question_is_asked(tickets, member, owner, project):
    """Apply locked the project's row for update, which the question's foreign-key check at commit
    waits for, then waited on the organization's row the question held."""
    changeset = changeset_propose(
        actor=Actor(user=member),
        project=project,
        title="Rename",
        operations=[
            {"op": "update", "item": tickets[2].key, "base_version": 1, "fields": {"title": "Renamed"}}
        ],
    )
    writers = Writers()
    go = asked_held_open(writers, member, project)

    writers.start("apply", lambda: changeset_apply(actor=Actor(user=owner), changeset=changeset))
    writers.wait_blocked("apply")
    go.set()

    assert writers.join() == {}
    assert Changeset.objects.get(pk=changeset.pk).status == "applied"
    assert Item.objects.get(pk=tickets[2].pk).title == "Renamed"
    assert Question.objects.count() == 1


def test_a_changeset_locks_the_tickets_it_updates_before_it_writes(tickets, member, owner, project):
    """Apply updated its first ticket (and so held the organization's row), then waited on its
    second, which a claim had locked and which then waited on the organization's row."""
    first, second = tickets[0], tickets[1]
    changeset = changeset_propose(
        actor=Actor(user=member),
        project=project,
        title="Rename both",
        operations=[
            {"op": "update", "item": key, "base_version": 1, "fields": {"title": f"Renamed {key}"}}
            for key in (first.key, second.key)
        ],
    )
    writers = Writers()
    ready, go = threading.Event(), threading.Event()

    def claim_second() -> None:
        with transaction.atomic():
            # A claim's first step: its ticket's row lock (tracker/services/work.py).
            Item.objects.select_for_update(of=("self",), no_key=True).get(pk=second.pk)
            ready.set()
            assert go.wait(WAIT), "never let go"
            claim_take(actor=Actor(user=member), project=project, item=second)

    writers.start("claim", claim_second)
    assert ready.wait(WAIT)
    writers.start("apply", lambda: changeset_apply(actor=Actor(user=owner), changeset=changeset))
    writers.wait_blocked("apply")
    go.set()

    assert writers.join() == {}
    assert Claim.objects.get().item_id == second.pk
    # The claim moved the second ticket on (in progress, version 2): the changeset no longer applies.
    decided = Changeset.objects.get(pk=changeset.pk)
    assert (decided.status, Item.objects.get(pk=first.pk).title) == ("conflicted", "Ticket 0")
    assert "is stale" in decided.conflict_reason
