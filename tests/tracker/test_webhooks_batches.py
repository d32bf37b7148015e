"""An endpoint's deliveries go in batches (docs/events.md#webhooks, ``tracker/services/webhooks.py``):
one after the other under one lease, up to the first that fails, the others waiting behind it; each
attempt of a batch logged; endpoints taking turns when more are due than the sender has threads."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ballet.env import WebhooksTable
from tests.fakes.webhook_receiver import Received, Receiver, Reply, receiving
from tracker.models import DeliveryStatus, Webhook, WebhookAttempt, WebhookDelivery
from tracker.services import webhooks
from tracker.services.activity import Actor
from tracker.services.webhook_endpoints import webhook_create
from tracker.services.webhooks import attempts_record, deliveries_send
from tracker.webhook_sender import Answer

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _quiet(settings, monkeypatch):
    """The receivers listen on loopback; the worker is not woken (the tests run the sender)."""
    settings.BALLET_WEBHOOKS = WebhooksTable(allow_private=True)
    monkeypatch.setattr(webhooks, "current_app", type("Quiet", (), {"send_task": lambda *a, **k: None})())


def hook_for(owner, project, receiver: Receiver, path: str = "/hook") -> Webhook:
    hook, secret = webhook_create(actor=Actor(user=owner), project=project, name=path, url=receiver.url(path))
    receiver.secret = secret
    return hook


def deliveries(hook: Webhook) -> list[WebhookDelivery]:
    return list(WebhookDelivery.objects.filter(webhook=hook).order_by("id"))


def test_a_batch_stops_at_its_first_failure_and_the_later_deliveries_wait_behind_it(
    project, owner, make_item
):
    def third_down(receiver: Receiver, _request: Received) -> Reply:
        return Reply(500, body=b"down") if len(receiver.received) == 3 else Reply(204)

    with receiving(third_down) as receiver:
        hook = hook_for(owner, project, receiver)
        for n in range(5):
            make_item(title=f"Ticket {n}")
        ids = [delivery.msg_id for delivery in deliveries(hook)]

        run = deliveries_send()

        assert [request.msg_id for request in receiver.received] == ids[:3]
        assert (run.delivered, run.failed) == (2, 1)
        first, second, third, fourth, fifth = deliveries(hook)
        assert [d.status for d in (first, second)] == [DeliveryStatus.DELIVERED] * 2
        assert (third.status, third.attempts) == (DeliveryStatus.PENDING, 1)
        assert third.next_attempt_at > timezone.now()  # its backoff
        assert [(d.status, d.attempts) for d in (fourth, fifth)] == [(DeliveryStatus.PENDING, 0)] * 2
        logged = WebhookAttempt.objects.filter(delivery__webhook=hook).order_by("pk")
        assert [(a.delivery_id, a.status_code, a.response) for a in logged] == [
            (first.pk, 204, ""),
            (second.pk, 204, ""),
            (third.pk, 500, "down"),
        ]
        hook.refresh_from_db()
        assert hook.failures_in_row == 1
        assert hook.failing_since is not None

        WebhookDelivery.objects.filter(pk=third.pk).update(next_attempt_at=timezone.now())
        deliveries_send()

    assert [request.msg_id for request in receiver.received] == [*ids[:3], *ids[2:]]
    assert all(request.verified for request in receiver.received)
    assert {d.status for d in deliveries(hook)} == {DeliveryStatus.DELIVERED}
    assert [d.attempts for d in deliveries(hook)] == [1, 1, 2, 1, 1]
    hook.refresh_from_db()
    assert (hook.failures_in_row, hook.failing_since) == (0, None)  # reset by the batch after it


def test_an_endpoint_s_deliveries_go_in_several_batches_in_order(project, owner, make_item, monkeypatch):
    monkeypatch.setattr(webhooks, "BATCH_DELIVERIES", 2)
    with receiving() as receiver:
        hook = hook_for(owner, project, receiver)
        for n in range(5):
            make_item(title=f"Ticket {n}")

        run = deliveries_send()

    assert [request.msg_id for request in receiver.received] == [d.msg_id for d in deliveries(hook)]
    assert run.delivered == 5
    assert WebhookAttempt.objects.filter(delivery__webhook=hook).count() == 5
    hook.refresh_from_db()
    assert (hook.leased_until, hook.lease_token) == (None, "")


def test_a_batch_whose_time_is_up_leaves_the_rest_to_the_next(project, owner, make_item, monkeypatch):
    monkeypatch.setattr(webhooks, "BATCH_SECONDS", 0.0)  # each batch sends its first delivery only
    with receiving() as receiver:
        hook = hook_for(owner, project, receiver)
        for n in range(3):
            make_item(title=f"Ticket {n}")

        run = deliveries_send()

    assert [request.msg_id for request in receiver.received] == [d.msg_id for d in deliveries(hook)]
    assert run.delivered == 3


def test_endpoints_take_turns_when_more_are_due_than_threads(project, owner, make_item, monkeypatch):
    monkeypatch.setattr(webhooks, "SENDING_THREADS", 1)
    monkeypatch.setattr(webhooks, "BATCH_DELIVERIES", 2)
    with receiving() as receiver:
        hook_for(owner, project, receiver, "/a")
        hook_for(owner, project, receiver, "/b")
        for n in range(4):
            make_item(title=f"Ticket {n}")

        deliveries_send()

    assert [request.path for request in receiver.received] == ["/a", "/a", "/b", "/b"] * 2


def test_the_failure_counters_are_written_only_when_they_are_not_zero(project, owner, make_item):
    with receiving() as receiver:
        hook = hook_for(owner, project, receiver)
        for n in range(3):
            make_item(title=f"Ticket {n}")

        with CaptureQueriesContext(connection) as clean:
            deliveries_send()
        for n in range(2):
            make_item(title=f"Again {n}")
        Webhook.objects.filter(pk=hook.pk).update(failures_in_row=2, failing_since=timezone.now())
        with CaptureQueriesContext(connection) as failing:
            deliveries_send()

    def counters_written(queries: CaptureQueriesContext) -> int:
        return sum(q["sql"].startswith("UPDATE") and "failures_in_row" in q["sql"] for q in queries)

    assert (counters_written(clean), counters_written(failing)) == (0, 1)
    assert len(receiver.received) == 5
    hook.refresh_from_db()
    assert (hook.failures_in_row, hook.failing_since) == (0, None)


def test_a_batch_s_attempts_skip_a_delivery_deleted_meanwhile(project, owner, make_item):
    with receiving() as receiver:
        hook = hook_for(owner, project, receiver)
        for n in range(2):
            make_item(title=f"Ticket {n}")
        kept, gone = deliveries(hook)
        batch: list[Any] = [(kept.pk, Answer(204, 3)), (gone.pk, Answer(204, 3))]
        gone.delete()

        delivered = attempts_record(batch)

    assert delivered == 1
    assert list(WebhookAttempt.objects.values_list("delivery_id", flat=True)) == [kept.pk]
