"""Who sends the deliveries (docs/events.md#webhooks): the embedded server's own loop, woken when
they commit and again when a retry is due; in production the worker's task, queued by name when
they commit, its publish failing nothing when Redis is down (beat's run picks them up)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from celery import current_app
from rest_framework.test import APIClient

from ballet import lifespan
from ballet.env import WebhooksTable
from tests.fakes.celery_broker import broker_down
from tests.fakes.webhook_receiver import Receiver, Reply, receiving
from tracker.models import DeliveryStatus, Webhook, WebhookAttempt, WebhookDelivery
from tracker.services import webhooks
from tracker.services.activity import Actor
from tracker.services.webhook_endpoints import webhook_create
from tracker.services.webhooks import deliveries_send
from tracker.webhook_tasks import deliver_webhooks


@pytest.fixture(autouse=True)
def _private_allowed(settings):
    settings.BALLET_WEBHOOKS = WebhooksTable(allow_private=True)


def hook_for(owner, project, receiver: Receiver) -> Webhook:
    hook, secret = webhook_create(actor=Actor(user=owner), project=project, name="CI", url=receiver.url())
    receiver.secret = secret
    return hook


async def test_the_embedded_server_sends_deliveries_itself_and_production_leaves_them_to_the_worker(settings):
    assert lifespan.webhook_deliveries.started is (not settings.PRODUCTION_MODE)


@pytest.mark.django_db(transaction=True)  # the loop's thread reads what the write committed
async def test_the_server_s_loop_delivers_when_its_bell_rings_and_retries_when_due(
    settings, project, owner, make_item, monkeypatch
):
    if settings.PRODUCTION_MODE:
        pytest.skip("in production the worker sends them (tracker.deliver_webhooks)")

    def down_once(receiver: Receiver, _request: Any) -> Reply:
        return Reply(500) if len(receiver.received) == 1 else Reply(204)

    with receiving(down_once) as receiver:
        # The commit rings the bell (test_webhooks_delivery.py); here the test rings it itself once
        # both writes are done, so that no attempt is made before it rings.
        with monkeypatch.context() as quiet:
            quiet.setattr(webhooks.bell, "ring", lambda: None)
            hook = await sync_to_async(hook_for)(owner, project, receiver)
            await sync_to_async(make_item)(title="Live")
        assert receiver.received == []
        webhooks.bell.ring()

        arrived = await asyncio.to_thread(receiver.wait_for, 2)  # the retry: about 5 s later

    assert arrived
    assert receiver.received[0].msg_id == receiver.received[1].msg_id
    assert all(request.verified for request in receiver.received)

    def delivered() -> bool:
        return WebhookDelivery.objects.filter(webhook=hook, status=DeliveryStatus.DELIVERED).exists()

    for _ in range(100):  # its attempt is logged just after the answer
        if await sync_to_async(delivered)():
            break
        await asyncio.sleep(0.05)
    assert await sync_to_async(WebhookAttempt.objects.filter(delivery__webhook=hook).count)() == 2


async def test_a_run_that_fails_is_logged_and_the_next_one_runs(monkeypatch, caplog):
    runs: list[int] = []

    def flaky(*, stop: Any = None) -> webhooks.SendRun:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("database gone")
        return webhooks.SendRun()

    monkeypatch.setattr(lifespan, "deliveries_send", flaky)
    monkeypatch.setattr(lifespan, "close_old_connections", lambda: None)
    loop = lifespan.WebhookDeliveries(tick=60.0, first=60.0)
    caplog.set_level(logging.ERROR, logger="ballet.lifespan")

    assert await loop.run() == 60.0
    assert await loop.run() == 60.0  # nothing pending: the next look is a tick away
    assert len(runs) == 2
    assert "sending webhook deliveries failed" in caplog.text


@pytest.mark.django_db
def test_the_worker_s_task_sends_what_is_due(project, owner, make_item, monkeypatch):
    monkeypatch.setattr(webhooks, "current_app", type("Quiet", (), {"send_task": lambda *a, **k: None})())
    with receiving() as receiver:
        hook_for(owner, project, receiver)
        make_item()

        assert deliver_webhooks() == 1

    assert len(receiver.received) == 1


@pytest.mark.django_db
def test_a_redis_outage_delays_deliveries_and_fails_no_write(
    settings, project, owner, member, make_item, caplog, django_capture_on_commit_callbacks
):
    settings.ONE_PROCESS = False
    ticket = make_item(state="ready")
    client = APIClient()
    client.force_authenticate(member)
    with receiving() as receiver:
        hook = hook_for(owner, project, receiver)
        assert webhooks.current_app.main == current_app.main  # the real Celery app publishes
        caplog.set_level(logging.WARNING, logger="tracker.services.webhooks")
        with broker_down(), django_capture_on_commit_callbacks(execute=True):
            claimed = client.post(f"/api/v1/projects/BAL/items/{ticket.key}/claim/", format="json")

        assert claimed.status_code == 201
        assert "could not queue tracker.deliver_webhooks" in caplog.text
        assert receiver.received == []
        statuses = WebhookDelivery.objects.filter(webhook=hook).values_list("status", flat=True)
        assert set(statuses) == {DeliveryStatus.PENDING}  # claim.taken and item.updated
        deliveries_send()  # beat's next run

    assert len(receiver.received) == 2
    assert set(WebhookDelivery.objects.filter(webhook=hook).values_list("status", flat=True)) == {"delivered"}
