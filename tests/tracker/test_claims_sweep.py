"""The sweep that ends claims whose lease ran out (docs/domain.md#work): Celery beat runs it in
production; the embedded server, which has no beat, runs it itself, beside its requests
(``ballet/lifespan.py``), and a sweep that fails does not stop the next. Each records when it
finished, and /metrics shows that and the lapsed claims it has yet to end."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import DatabaseError
from django.utils import timezone

from ballet import lifespan
from tracker.models import Claim, Item, Sweep
from tracker.selectors import lease_sweep_finished_at
from tracker.services.activity import Actor
from tracker.services.work import claim_take, claims_expire


async def test_the_embedded_server_sweeps_claims_itself_and_production_leaves_it_to_beat(settings):
    assert lifespan.lease_sweep.started is (not settings.PRODUCTION_MODE)


@pytest.mark.django_db(transaction=True)  # the database threads check their connections now and then
async def test_a_failing_sweep_is_logged_and_the_next_one_runs(monkeypatch, caplog):
    calls: list[int] = []
    third = threading.Event()

    def flaky() -> int:  # on the database thread
        calls.append(1)
        if len(calls) == 3:
            third.set()
        if len(calls) == 1:
            raise DatabaseError("the database is down")
        return 0

    monkeypatch.setattr(lifespan, "claims_expire", flaky)
    sweep = lifespan.LeaseSweep(interval=0.001)
    caplog.set_level(logging.ERROR, logger="ballet.lifespan")

    await sweep.start()
    try:
        assert await asyncio.to_thread(third.wait, 30)
    finally:
        await sweep.stop()

    assert not sweep.started
    failed = [r for r in caplog.records if "sweep of claims" in r.getMessage()]
    assert failed
    assert failed[0].exc_info is not None
    assert failed[0].exc_info[1] is not None
    assert str(failed[0].exc_info[1]) == "the database is down"


@pytest.mark.django_db(transaction=True)
async def test_a_sweep_ends_the_claims_whose_lease_ran_out(make_item, member):
    ticket = await sync_to_async(make_item)(state="ready")
    claim = await sync_to_async(claim_take)(actor=Actor(user=member), project=ticket.project, item=ticket)
    past = timezone.now() - timedelta(minutes=1)
    await Claim.objects.filter(pk=claim.pk).aupdate(expires_at=past)

    assert await lifespan.LeaseSweep().sweep() == 1

    assert (await Claim.objects.aget(pk=claim.pk)).status == "expired"
    assert (await Item.objects.aget(pk=ticket.pk)).state == "ready"


# --- when it last ran, for /metrics and /healthz ----------------------------------------------


def lapse(claim: Claim, minutes: int = 1) -> None:
    past = timezone.now() - timedelta(minutes=minutes)
    Claim.objects.filter(pk=claim.pk).update(renewed_at=past - timedelta(minutes=30), expires_at=past)


def swept_at(moment) -> None:
    Sweep.objects.update_or_create(name="leases", defaults={"finished_at": moment})


def metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return None


@pytest.mark.django_db
def test_a_sweep_records_when_it_finished_for_every_process_to_read():
    assert lease_sweep_finished_at() is None
    before = timezone.now()

    assert claims_expire() == 0  # nothing to end is still a sweep that ran

    finished = lease_sweep_finished_at()
    assert finished is not None
    assert before <= finished <= timezone.now()


@pytest.mark.django_db(transaction=True)
async def test_the_embedded_servers_sweep_records_when_it_finished():
    await lifespan.LeaseSweep().sweep()

    assert await sync_to_async(lease_sweep_finished_at)() is not None


@pytest.mark.django_db
def test_metrics_count_lapsed_claims_unswept_as_expired(client, make_item, member):
    held = make_item(title="Held", state="ready")
    ticket = make_item(title="Lapsed", state="ready")
    claim_take(actor=Actor(user=member), project=held.project, item=held)
    lapse(claim_take(actor=Actor(user=member), project=ticket.project, item=ticket))

    text = client.get("/metrics").content.decode()

    assert metric(text, "ballet_claims_lapsed") == 1.0
    assert 'ballet_claims{status="active"} 1.0' in text
    assert 'ballet_claims{status="expired"} 1.0' in text
    assert metric(text, "ballet_lease_sweep_age_seconds") is None  # no sweep yet: nothing to age

    claims_expire()
    text = client.get("/metrics").content.decode()

    assert metric(text, "ballet_claims_lapsed") == 0.0
    assert 'ballet_claims{status="expired"} 1.0' in text
    age = metric(text, "ballet_lease_sweep_age_seconds")
    assert age is not None
    assert 0.0 <= age < 5.0


@pytest.mark.django_db
def test_metrics_show_how_long_ago_the_sweep_last_finished(client):
    swept_at(timezone.now() - timedelta(minutes=7))

    age = metric(client.get("/metrics").content.decode(), "ballet_lease_sweep_age_seconds")

    assert age is not None
    assert 420.0 <= age < 430.0
