"""Workers racing for one ticket (docs/domain.md#work): threads of one process and separate
processes, against the same database, end with exactly one active claim; every other worker is
told who holds it.

The racers share the test database, which commits (``transaction=True``); in the embedded mode it
is a file, opened with the server's settings (its busy timeout queues the second writer).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection, connections

from tracker.errors import BalletError
from tracker.models import Claim, Item
from tracker.services.activity import Actor
from tracker.services.work import claim_take

ROOT = Path(__file__).resolve().parents[2]
WAIT = 60.0  # seconds a racer waits for the others before the test gives up on it

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def racer_thread() -> Iterator[None]:
    """A racer's thread: a connection of its own to the test database, closed at the end."""
    try:
        yield
    finally:
        connections.close_all()


def racer_env() -> dict[str, str]:
    """The environment of a racer process: the test database, as the server is given its own."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "ballet.settings.test"}
    db = connection.settings_dict
    if not settings.PRODUCTION_MODE:
        env.pop("DATABASE_URL", None)
        env["BALLET_SQLITE_PATH"] = str(db["NAME"])
    else:
        password = f":{quote(db['PASSWORD'], safe='')}" if db["PASSWORD"] else ""
        user = quote(db["USER"], safe="")
        env["DATABASE_URL"] = f"postgres://{user}{password}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
    return env


def outcome(item: Item) -> tuple[list[str], str]:
    """The holders of the item's active claims, and its state."""
    holders = Claim.objects.filter(item=item, status="active").values_list("holder__username", flat=True)
    return list(holders), Item.objects.get(pk=item.pk).state


@pytest.fixture
def racers(users) -> list[Any]:
    return [users["member"], users["maintainer"], users["owner"]]


def assert_one_winner(outcomes: dict[str, str], holders: list[str], state: str, key: str) -> None:
    winners = [name for name, outcome in outcomes.items() if outcome == "won"]
    assert len(winners) == 1, outcomes
    assert holders == winners
    assert state == "in_progress"
    for name, outcome in outcomes.items():
        if name != winners[0]:
            assert outcome.startswith(f"409 {key} is claimed by {winners[0]} until "), outcomes


def race_in_threads(racers: list[Any], ticket: Item) -> dict[str, str]:
    """Each racer claims ``ticket`` in a thread of its own, all at once: how it went for each."""
    barrier = threading.Barrier(len(racers))
    outcomes: dict[str, str] = {}

    def claim(user: Any) -> None:
        with racer_thread():
            barrier.wait(timeout=WAIT)
            try:
                claim_take(actor=Actor(user=user), project=ticket.project, item=ticket)
            except BalletError as exc:
                outcomes[user.username] = f"{exc.status} {exc.message}"
            except Exception as exc:
                outcomes[user.username] = repr(exc)
            else:
                outcomes[user.username] = "won"

    threads = [threading.Thread(target=claim, args=(user,)) for user in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WAIT)
    return outcomes


def test_threads_racing_for_a_ticket_end_with_one_claim(make_item, racers):
    tickets = [make_item(title=f"Race {n}", state="ready") for n in range(3)]

    for ticket in tickets:
        outcomes = race_in_threads(racers, ticket)

        holders, state = outcome(ticket)
        assert_one_winner(outcomes, holders, state, ticket.key)


RACER = """
import json, sys, time
from pathlib import Path

import django

django.setup()

from django.contrib.auth.models import User

from tracker.errors import BalletError
from tracker.models import Item
from tracker.services.activity import Actor
from tracker.services.work import claim_take

name, item_id, gate = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
user = User.objects.get(username=name)
item = Item.objects.select_related("project").get(pk=item_id)
(gate / f"ready-{name}").touch()
deadline = time.monotonic() + 60
while not (gate / "go").exists() and time.monotonic() < deadline:
    time.sleep(0.002)
try:
    claim_take(actor=Actor(user=user), project=item.project, item=item)
except BalletError as exc:
    print(json.dumps(f"{exc.status} {exc.message}"))
else:
    print(json.dumps("won"))
"""


def test_processes_racing_for_a_ticket_end_with_one_claim(make_item, racers, tmp_path):
    ticket = make_item(title="Race", state="ready")
    gate = tmp_path / "gate"
    gate.mkdir()
    processes = {
        user.username: subprocess.Popen(
            [sys.executable, "-c", RACER, user.username, str(ticket.pk), str(gate)],
            cwd=ROOT,
            env=racer_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for user in racers
    }
    try:
        deadline = time.monotonic() + WAIT
        while len(list(gate.glob("ready-*"))) < len(racers) and time.monotonic() < deadline:
            if any(process.poll() is not None for process in processes.values()):
                break  # one died before the start: its stderr says why
            time.sleep(0.01)
        (gate / "go").touch()
        results = {name: process.communicate(timeout=WAIT) for name, process in processes.items()}
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()

    outcomes = {}
    for name, (out, err) in results.items():
        assert processes[name].returncode == 0, err
        outcomes[name] = json.loads(out.strip().splitlines()[-1])
    holders, state = outcome(ticket)
    assert_one_winner(outcomes, holders, state, ticket.key)
