"""Webhook deliveries (docs/events.md#webhooks): what an event queues, for whom, and how it is sent
to a receiver on 127.0.0.1 (``[webhooks] allow_private``): signed, in order per endpoint, retried,
logged, never followed through a redirect, never held up by another endpoint, never sent to an
address refused, and an endpoint failing too often disabled with its owners told."""

from __future__ import annotations

import json
import socket
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from ballet.env import WebhooksTable
from knowledge.services import knowledge_create
from tests.factories import make_membership, make_project, make_user
from tests.fakes.webhook_receiver import Received, Receiver, Reply, always, receiving
from tracker import webhook_sender
from tracker.models import DeliveryStatus, Event, Notice, Role, Webhook, WebhookAttempt, WebhookDelivery
from tracker.services import webhooks
from tracker.services.activity import Actor
from tracker.services.events import event_record
from tracker.services.items import item_create
from tracker.services.members import membership_remove
from tracker.services.webhook_endpoints import (
    delivery_redeliver,
    secret_new,
    webhook_create,
    webhook_ping,
)
from tracker.services.webhooks import deliveries_queue, deliveries_send
from tracker.services.work import claim_take
from tracker.trust import crypto

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _private_allowed(settings):
    """The test's receivers listen on loopback."""
    settings.BALLET_WEBHOOKS = WebhooksTable(allow_private=True)


@pytest.fixture(autouse=True)
def published(monkeypatch) -> list[str]:
    """The tasks published to Celery by name, instead of publishing them."""
    sent: list[str] = []

    class Publisher:
        def send_task(self, name: str, *args: Any, **kwargs: Any) -> None:
            sent.append(name)

    monkeypatch.setattr(webhooks, "current_app", Publisher())
    return sent


def hook_for(owner, project, receiver: Receiver, **fields: Any) -> Webhook:
    """A webhook of ``project`` made by ``owner`` through the service, posting to ``receiver``."""
    fields = {"name": "CI", "url": receiver.url(), **fields}
    hook, secret = webhook_create(actor=Actor(user=owner), project=project, **fields)
    receiver.secret = secret
    return hook


def due_now(hook: Webhook) -> None:
    """The time of the pending deliveries' next attempt has come."""
    WebhookDelivery.objects.filter(webhook=hook, status=DeliveryStatus.PENDING).update(
        next_attempt_at=timezone.now()
    )


def bodies(receiver: Receiver) -> list[dict[str, Any]]:
    return [json.loads(request.body) for request in receiver.received]


def test_an_event_is_posted_to_the_project_s_webhook_signed_as_standard_webhooks(project, owner, make_item):
    with receiving() as receiver:
        hook = hook_for(owner, project, receiver)
        item = make_item(title="Log in")

        run = deliveries_send()

    [request] = receiver.received
    assert request.verified is True
    assert request.headers["content-type"] == "application/json"
    assert request.headers["webhook-signature"].startswith("v1,")
    body = json.loads(request.body)
    assert body["type"] == "item.created"
    assert body["data"]["type"] == "item.created"
    assert body["data"]["project"] == "BAL"
    assert body["data"]["target"] == item.key
    assert body["data"]["actor"] == "user:owner"
    assert body["data"]["data"]["title"] == "Log in"
    assert body["timestamp"] == body["data"]["created_at"]
    delivery = WebhookDelivery.objects.get(webhook=hook)
    assert request.msg_id == delivery.msg_id
    assert delivery.status == DeliveryStatus.DELIVERED
    assert [(a.status_code, a.error) for a in delivery.attempt_log.all()] == [(204, "")]
    assert run.delivered == 1
    assert run.next_due is None


def test_a_failed_delivery_is_sent_again_with_the_same_id_and_later_ones_wait_behind_it(
    project, owner, make_item
):
    def down_once(receiver: Receiver, request: Received) -> Reply:
        return Reply(500, body=b"down for maintenance") if len(receiver.received) == 1 else Reply(204)

    with receiving(down_once) as receiver:
        hook = hook_for(owner, project, receiver)
        for title in ("One", "Two", "Three"):
            make_item(title=title)
        first, second, third = WebhookDelivery.objects.filter(webhook=hook).order_by("id")

        deliveries_send()
        assert [r.msg_id for r in receiver.received] == [first.msg_id]  # the others wait behind it
        first.refresh_from_db()
        assert first.status == DeliveryStatus.PENDING
        assert first.next_attempt_at > timezone.now()  # about 5 s later
        due_now(hook)
        deliveries_send()

    assert [r.msg_id for r in receiver.received] == [first.msg_id, first.msg_id, second.msg_id, third.msg_id]
    assert [b["data"]["data"]["title"] for b in bodies(receiver)] == ["One", "One", "Two", "Three"]
    assert all(request.verified for request in receiver.received)
    attempts = list(WebhookAttempt.objects.filter(delivery=first).order_by("pk"))
    assert [(a.status_code, a.response) for a in attempts] == [(500, "down for maintenance"), (204, "")]
    assert "500" in attempts[0].error
    assert set(WebhookDelivery.objects.filter(webhook=hook).values_list("status", flat=True)) == {"delivered"}
    hook.refresh_from_db()
    assert (hook.failures_in_row, hook.failing_since) == (0, None)


def test_a_receiver_that_hangs_holds_up_no_other_endpoint(project, owner, make_item):
    seen: dict[str, bool] = {}
    with receiving() as quick:

        def hang(receiver: Receiver, request: Received) -> Reply:
            if "quick_done" not in seen:  # the first request waits for the other endpoint's three
                seen["quick_done"] = quick.wait_for(3, within=8.0)
            return Reply(204)

        with receiving(hang) as slow:
            slow_hook = hook_for(owner, project, slow, name="slow")
            quick_hook = hook_for(owner, project, quick, name="quick")
            for n in range(3):
                make_item(title=f"Ticket {n}")

            deliveries_send()

    assert seen["quick_done"] is True  # all three reached the quick endpoint while the slow one hung
    assert len(slow.received) == 3
    for hook in (slow_hook, quick_hook):
        statuses = WebhookDelivery.objects.filter(webhook=hook).values_list("status", flat=True)
        assert list(statuses) == ["delivered"] * 3


def test_a_redirect_is_not_followed_and_counts_as_a_failure(project, owner, make_item):
    with receiving() as elsewhere:
        moved = lambda _r, _q: Reply(302, headers={"Location": elsewhere.url()})  # noqa: E731
        with receiving(moved) as receiver:
            hook = hook_for(owner, project, receiver)
            make_item()

            deliveries_send()

    assert elsewhere.received == []
    delivery = WebhookDelivery.objects.get(webhook=hook)
    assert delivery.status == DeliveryStatus.PENDING
    [attempt] = delivery.attempt_log.all()
    assert attempt.status_code == 302
    assert "redirect" in attempt.error
    assert elsewhere.url() in attempt.error


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1/hook",
        "http://127.0.0.1:9/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:9/hook",
        "http://localhost:9/hook",
    ],
)
def test_a_private_address_is_refused_at_send_time_too(settings, project, owner, make_item, monkeypatch, url):
    settings.BALLET_WEBHOOKS = WebhooksTable(allow_private=False)
    # Stored as a URL allowed when it was saved (the setting was on, or the DNS said otherwise).
    hook = Webhook.objects.create(
        project=project, name="old", url=url, secret=crypto.encrypt(secret_new()), created_by=owner
    )
    connections: list[Any] = []

    def connect(*args: Any, **kwargs: Any) -> socket.socket:
        connections.append(args)
        raise AssertionError("connected to a refused address")

    monkeypatch.setattr(webhook_sender.socket, "create_connection", connect)
    make_item()

    deliveries_send()

    assert connections == []
    [attempt] = WebhookAttempt.objects.filter(delivery__webhook=hook)
    assert attempt.status_code is None
    assert "address" in attempt.error


def test_the_request_goes_to_the_address_checked_under_the_host_s_name(
    project, owner, make_item, monkeypatch
):
    resolved: list[str] = []
    real = socket.getaddrinfo

    def resolve(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        resolved.append(host)
        return real("127.0.0.1", port, *args, **kwargs)

    monkeypatch.setattr(webhook_sender.socket, "getaddrinfo", resolve)
    with receiving() as receiver:
        hook_for(owner, project, receiver, url=receiver.url(host="hooks.example.test"))
        resolved.clear()
        make_item()

        deliveries_send()

    # The name is resolved once per send; the connection is made to the address that was checked.
    assert resolved == ["hooks.example.test", "127.0.0.1"]
    [request] = receiver.received
    assert request.headers["host"] == f"hooks.example.test:{receiver.port}"
    assert request.verified is True


def test_an_endpoint_failing_20_attempts_in_a_row_is_disabled_and_its_owners_told(project, owner, make_item):
    other_owner = make_user(username="second-owner")
    make_membership(project=project, user=other_owner, role=Role.OWNER)
    with receiving(always(500)) as receiver:
        hook = hook_for(owner, project, receiver)
        for n in range(3):
            make_item(title=f"Ticket {n}")
        for _ in range(25):
            due_now(hook)
            deliveries_send()
            hook.refresh_from_db()
            if not hook.enabled:
                break

    assert not hook.enabled
    assert "20 failed attempts" in hook.disabled_reason
    assert WebhookAttempt.objects.filter(delivery__webhook=hook).count() == 20
    statuses = list(WebhookDelivery.objects.filter(webhook=hook).values_list("status", flat=True))
    assert statuses == ["failed", "failed", "failed"]  # 7 attempts each, the last one's 6th disabled it
    notices = Notice.objects.filter(kind=webhooks.NOTICE_KIND)
    assert {n.user_id for n in notices} == {owner.pk, other_owner.pk}
    assert all(n.url == f"/projects/BAL/webhooks/{hook.pk}/" and "CI" in n.title for n in notices)
    make_item(title="After")
    assert WebhookDelivery.objects.filter(webhook=hook).count() == 3  # a disabled endpoint queues nothing


def test_an_endpoint_failing_for_a_day_is_disabled(project, owner, make_item):
    with receiving(always(503)) as receiver:
        hook = hook_for(owner, project, receiver)
        make_item()
        deliveries_send()
        hook.refresh_from_db()
        assert hook.enabled
        assert hook.failing_since is not None
        Webhook.objects.filter(pk=hook.pk).update(failing_since=timezone.now() - timedelta(hours=25))
        due_now(hook)

        deliveries_send()

    hook.refresh_from_db()
    assert not hook.enabled
    assert "a day" in hook.disabled_reason
    assert Notice.objects.filter(user=owner, kind=webhooks.NOTICE_KIND).count() == 1


def test_an_endpoint_s_lease_keeps_a_second_sender_out_until_it_runs_out(project, owner, make_item):
    with receiving() as receiver:
        hook = hook_for(owner, project, receiver)
        make_item()
        held_until = timezone.now() + timedelta(seconds=60)
        Webhook.objects.filter(pk=hook.pk).update(leased_until=held_until, lease_token="another-sender")

        run = deliveries_send()
        assert receiver.received == []
        assert run.next_due == held_until
        # The other sender was killed: its lease runs out, and the delivery goes.
        Webhook.objects.filter(pk=hook.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
        deliveries_send()

    assert len(receiver.received) == 1
    hook.refresh_from_db()
    assert (hook.leased_until, hook.lease_token) == (None, "")


def test_only_the_types_a_webhook_wants_are_queued(project, owner, member, make_item):
    with receiving() as receiver:
        hook = hook_for(owner, project, receiver, types=["claim.taken"])
        ticket = make_item(state="ready")  # item.created and item.runnable: not wanted
        claim_take(actor=Actor(user=member), project=project, item=ticket)

        deliveries_send()

    assert [body["type"] for body in bodies(receiver)] == ["claim.taken"]
    assert bodies(receiver)[0]["data"]["target"] == ticket.key
    assert WebhookDelivery.objects.filter(webhook=hook).count() == 1


def test_knowledge_its_creator_cannot_read_is_not_delivered(org, project, owner, make_item):
    hidden = make_project(organization=org, key="SEC", name="Secret")
    writer = make_user(username="writer")
    for where in (project, hidden):
        make_membership(project=where, user=writer, role=Role.MEMBER)
    with receiving() as receiver:
        hook_for(owner, project, receiver)

        knowledge_create(actor=Actor(user=writer), kind="note", title="Both", projects=[project, hidden])
        assert WebhookDelivery.objects.count() == 0  # it requires SEC, which the creator cannot read
        make_membership(project=hidden, user=owner, role=Role.VIEWER)
        knowledge_create(
            actor=Actor(user=writer), kind="note", title="Both again", projects=[project, hidden]
        )
        deliveries_send()

    assert [body["data"]["data"]["title"] for body in bodies(receiver)] == ["Both again"]


def test_a_request_private_to_another_user_is_not_delivered(project, owner, member):
    with receiving() as receiver:
        hook = hook_for(owner, project, receiver)
        for whose in (member, owner):
            event_record(
                project=project,
                type="request.waiting",
                actor="planner:x",
                on_behalf_of=whose,
                target=f"request:{whose.pk}",
                data={"kind": "question"},
                private_to=whose,
            )

    [delivery] = WebhookDelivery.objects.filter(webhook=hook)
    assert delivery.event is not None
    assert delivery.event.private_to_id == owner.pk


def test_organization_wide_events_go_to_no_webhook(org, project, owner):
    with receiving() as receiver:
        hook_for(owner, project, receiver)
        event = Event.objects.create(
            organization=org, project=None, type="knowledge.created", actor="user:owner", target="knowledge:1"
        )

        deliveries_queue([event])

    assert WebhookDelivery.objects.count() == 0


def test_a_creator_removed_from_the_project_gets_nothing_more(project, owner):
    other_owner = make_user(username="second-owner")
    make_membership(project=project, user=other_owner, role=Role.OWNER)
    with receiving() as receiver:
        hook = hook_for(owner, project, receiver)
        item_create(actor=Actor(user=other_owner), project=project, kind="ticket", fields={"title": "Before"})
        membership_remove(actor=Actor(user=other_owner), project=project, username="owner")
        item_create(actor=Actor(user=other_owner), project=project, kind="ticket", fields={"title": "After"})

    created = WebhookDelivery.objects.filter(webhook=hook, type="item.created")
    assert [d.event.data["title"] for d in created if d.event is not None] == ["Before"]


def test_what_was_queued_before_the_creator_lost_the_project_is_never_sent_after(project, owner):
    """A delivery queued (or failing, retried for hours) while its creator read the project is
    checked again as it is sent: once they are removed, it ends unsent, and the log says why."""
    other_owner = make_user(username="second-owner")
    make_membership(project=project, user=other_owner, role=Role.OWNER)
    with receiving() as receiver:
        hook = hook_for(owner, project, receiver)
        item_create(actor=Actor(user=other_owner), project=project, kind="ticket", fields={"title": "Queued"})
        webhook_ping(actor=Actor(user=other_owner), project=project, webhook_id=hook.pk)
        membership_remove(actor=Actor(user=other_owner), project=project, username="owner")

        deliveries_send()

    assert [body["type"] for body in bodies(receiver)] == ["ping"]  # a ping reads no event
    queued = WebhookDelivery.objects.get(webhook=hook, type="item.created")
    assert queued.status == DeliveryStatus.FAILED
    [attempt] = WebhookAttempt.objects.filter(delivery=queued)
    assert attempt.status_code is None
    assert attempt.error == webhooks.NOT_READABLE


def test_a_slack_webhook_gets_one_line_with_a_link(project, owner, make_item, settings):
    settings.BALLET_BASE_URL = "https://ballet.example"
    with receiving() as receiver:
        hook_for(owner, project, receiver, format="slack")
        item = make_item(title="Fix <the> login & co")

        deliveries_send()

    [body] = bodies(receiver)
    assert set(body) == {"text"}
    assert "Fix &lt;the&gt; login &amp; co" in body["text"]
    assert f"<https://ballet.example/projects/BAL/items/{item.key}/|open>" in body["text"]


def test_a_ping_and_a_redelivery_go_out_signed_with_their_ids(project, owner, make_item):
    with receiving() as receiver:
        hook = hook_for(owner, project, receiver)
        make_item()
        deliveries_send()
        delivered = WebhookDelivery.objects.get(webhook=hook)

        ping = webhook_ping(actor=Actor(user=owner), project=project, webhook_id=hook.pk)
        again = delivery_redeliver(
            actor=Actor(user=owner), project=project, webhook_id=hook.pk, delivery_id=delivered.pk
        )
        assert (again.status, again.attempts) == (DeliveryStatus.PENDING, 0)
        deliveries_send()

    assert [r.msg_id for r in receiver.received] == [delivered.msg_id, delivered.msg_id, ping.msg_id]
    assert all(request.verified for request in receiver.received)
    ping_body = bodies(receiver)[2]
    assert ping_body["type"] == "ping"
    assert ping_body["data"]["project"] == "BAL"
    assert WebhookAttempt.objects.filter(delivery=delivered).count() == 2


def test_in_production_a_commit_wakes_the_worker_and_nothing_is_sent_in_the_request(
    settings, published, project, owner, make_item, django_capture_on_commit_callbacks
):
    settings.ONE_PROCESS = False
    with receiving() as receiver:
        hook = hook_for(owner, project, receiver)
        with django_capture_on_commit_callbacks(execute=True):
            make_item()

        assert receiver.received == []
    assert published == [webhooks.DELIVER_TASK]
    assert WebhookDelivery.objects.get(webhook=hook).status == DeliveryStatus.PENDING


def test_in_the_embedded_mode_a_commit_rings_the_server_s_bell_and_sends_nothing_itself(
    settings, published, project, owner, make_item, django_capture_on_commit_callbacks, monkeypatch
):
    settings.ONE_PROCESS = True
    rung: list[bool] = []
    monkeypatch.setattr(webhooks.bell, "ring", lambda: rung.append(True))
    with receiving() as receiver:
        hook_for(owner, project, receiver)
        with django_capture_on_commit_callbacks(execute=True):
            make_item()

        assert receiver.received == []
    assert rung == [True]
    assert published == []
