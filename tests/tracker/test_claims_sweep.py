"""The sweep that ends claims whose lease ran out (docs/domain.md#work): Celery beat runs it in
production; the embedded server, which has no beat, runs it itself, beside its requests
(``ballet/lifespan.py``), and a sweep that fails does not stop the next."""

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
from tracker.models import Claim, Item
from tracker.services.activity import Actor
from tracker.services.work import claim_take


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
