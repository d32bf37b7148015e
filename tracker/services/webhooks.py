"""Webhooks (docs/events.md#webhooks): the deliveries an event queues, and their sending.

:func:`deliveries_queue` runs in the transaction that records the events (the outbox): one
delivery per event and endpoint of its project that wants the event's type and whose creator may
read the event. Once they commit, the sender is woken: the embedded server's delivery loop
(``ballet/lifespan.py``, through :data:`bell`), or in production the worker's
``tracker.deliver_webhooks`` (``tracker/webhook_tasks.py``), which beat also runs every 5 s: a
publish that fails is logged and only delays the deliveries.

:func:`deliveries_send` sends what is due. Per endpoint one sender at a time, in order: it takes
the endpoint's lease (a conditional UPDATE; a sender killed mid-way leaves a lease that simply
runs out) and sends its due deliveries oldest first in batches (up to ``BATCH_DELIVERIES``, one
after the other on one HTTP session, stopping at the first failure: later deliveries wait behind
it). After its first, no request of a batch starts later than ``BATCH_SECONDS`` after the lease
was renewed, so a batch ends well within the lease. A batch's attempts are logged together (one
INSERT, one UPDATE of the delivered; the failure counters written only when not zero), then the
lease is renewed for the next batch. Endpoints are sent to at once, one batch per thread of a
small pool, taking turns when more are due than threads, so a receiver that hangs holds up only
itself. The database is touched on the calling thread only; the pool's threads only talk HTTP
(``tracker/webhook_sender.py``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import uuid
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import DateTimeField, F, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import timezone

from tracker import webhook_sender
from tracker.commit_hooks import on_commit_robust
from tracker.db import event_rows
from tracker.db.event_rows import WebhookWanting
from tracker.event_selectors import event_json, event_readable
from tracker.models import (
    DeliveryStatus,
    Event,
    Membership,
    Notice,
    NotifyKind,
    Role,
    Webhook,
    WebhookAttempt,
    WebhookDelivery,
    WebhookFormat,
)
from tracker.page_links import changeset_url, item_url, knowledge_url, plan_url
from tracker.services import notifications
from tracker.trust import crypto
from tracker.trust.permissions import TRACKER_READ, access_scope, project_ids_with

logger = logging.getLogger(__name__)

DELIVER_TASK: Final = "tracker.deliver_webhooks"
# After the first failed attempt, the next is this long after the last; then the delivery failed.
RETRY_DELAYS: Final = (
    timedelta(seconds=5),
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=2),
    timedelta(hours=5),
    timedelta(hours=10),
)
DISABLE_AFTER: Final = timedelta(hours=24)  # failing for this long disables an endpoint
DISABLE_AFTER_FAILURES: Final = 20  # and so do this many failed attempts in a row
LEASE: Final = timedelta(seconds=30)
SENDING_THREADS: Final = 8
RUN_SECONDS: Final = 60.0  # a run takes new deliveries for this long, then finishes what is on its way
LOOK_AGAIN_SECONDS: Final = 1.0  # while deliveries are on their way, new ones are looked for this often
BATCH_DELIVERIES: Final = 50  # an endpoint's due deliveries sent one after the other under one look
BATCH_SECONDS: Final = 1.0  # after which a batch starts no new request: its outcomes are recorded
NOT_READABLE: Final = "Not sent: the endpoint's creator may no longer read this event."
NOTICE_KIND: Final = "webhook_disabled"  # planner/domain/inbox.py's words for it


# --- the outbox ---------------------------------------------------------------------------------


def deliveries_queue(events: list[Event]) -> None:
    """Queue a delivery of each of ``events`` to each endpoint of its project that wants it; call
    in the events' transaction. An organization-wide event (no project) goes to no endpoint."""
    events = [event for event in events if event.project_id is not None]
    if not events:
        return
    hooks = event_rows.webhooks_enabled({event.project_id for event in events if event.project_id})
    if not hooks:
        return
    now = timezone.now()
    rows = []
    with access_scope(within=True):
        readable = {
            reader: set(project_ids_with(reader, TRACKER_READ))
            for reader in {hook.created_by_id for hook in hooks}
            if reader is not None
        }
        for event in events:
            for hook in hooks:
                if hook.project_id == event.project_id and _wants(hook, event, readable):
                    rows.append(
                        WebhookDelivery(
                            webhook_id=hook.id,
                            event=event,
                            msg_id=f"msg_{event.pk}_{hook.id}",
                            type=event.type,
                            next_attempt_at=now,
                        )
                    )
    if rows:
        WebhookDelivery.objects.bulk_create(rows)
        on_commit_robust(deliveries_kick)


def _wants(hook: WebhookWanting, event: Event, readable: dict[int, set[int]]) -> bool:
    """The endpoint takes the event's type, and its creator may read the event (as the feed would
    show it to them: ``tracker/event_selectors.py``)."""
    if hook.types and event.type not in hook.types:
        return False
    reader = hook.created_by_id
    if reader is None:
        return False
    return event_readable(event, user=reader, readable=readable[reader])


class DeliveryBell:
    """Wakes the embedded server's delivery loop (``ballet/lifespan.py``) from any thread, so that
    committed deliveries go out now rather than at the loop's next tick."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def listen(self) -> asyncio.Event:
        """An event set whenever the bell rings; call on the loop that waits on it."""
        woken = asyncio.Event()
        with self._lock:
            self._listeners.append((asyncio.get_running_loop(), woken))
        return woken

    def forget(self, woken: asyncio.Event) -> None:
        with self._lock:
            self._listeners = [(loop, event) for loop, event in self._listeners if event is not woken]

    def ring(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for loop, woken in listeners:
            try:
                loop.call_soon_threadsafe(woken.set)
            except RuntimeError:  # its loop has closed
                self.forget(woken)


bell = DeliveryBell()


def deliveries_kick() -> None:
    """Wake the sender once deliveries are committed: the server's loop in the embedded mode, the
    worker in production. A failed publish is logged: beat's run every 5 s sends them later."""
    if settings.ONE_PROCESS:
        bell.ring()
        return
    try:
        current_app.send_task(DELIVER_TASK)
    except Exception:
        logger.warning(
            "could not queue %s; the deliveries wait for beat's next run", DELIVER_TASK, exc_info=True
        )


# --- what is sent -------------------------------------------------------------------------------


def event_body(event: Event) -> dict[str, Any]:
    """The body of an event's delivery: ``{"type", "timestamp", "data"}`` (Standard Webhooks), its
    data the event as the feed shows it."""
    data = event_json(event)
    return {"type": event.type, "timestamp": data["created_at"], "data": data}


def _page_of(event: Event) -> str:
    """The address of the page of what ``event`` is about."""
    assert event.project is not None
    key, target = event.project.key, event.target
    kind, _, number = target.partition(":")
    if target.startswith(f"{key}-"):
        path = item_url(key, target)
    elif kind == "changeset" and number.isascii() and number.isdigit():
        path = changeset_url(key, int(number))
    elif kind == "knowledge" and number.isascii() and number.isdigit():
        path = knowledge_url(key, int(number))
    else:
        path = plan_url(key)
    return f"{settings.BALLET_BASE_URL}{path}"


def _slack_escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_text(event: Event) -> str:
    """One line for a Slack channel: who did what to which, and a link to its page."""
    assert event.project is not None
    who = event.actor.partition(":")[2] or event.actor
    title = event.data.get("title") if isinstance(event.data, dict) else None
    about = f" “{title}”" if isinstance(title, str) and title else ""
    line = f"[{event.project.key}] {who}: {event.type} {event.target}{about}"
    return f"{_slack_escaped(line[:500])} <{_page_of(event)}|open>"


KEY_CHANGED: Final = (
    "The webhook's secret cannot be decrypted (the credential key changed): make a new webhook."
)


def _outgoing(
    delivery: WebhookDelivery, hook: Webhook, secret: str, now: datetime
) -> webhook_sender.Outgoing:
    """What to send for ``delivery`` to ``hook`` now, signed with its ``secret``."""
    event = delivery.event
    if hook.format == WebhookFormat.SLACK:
        text = slack_text(event) if event is not None else f"Ballet: a test ping for “{hook.name}”."
        document: dict[str, Any] = {"text": text}
    elif event is not None:
        document = event_body(event)
    else:
        document = {
            "type": delivery.type,
            "timestamp": delivery.created_at.isoformat(),
            "data": delivery.payload,
        }
    body = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    headers = webhook_sender.signed_headers(secret=secret, msg_id=delivery.msg_id, at=now, body=body)
    return webhook_sender.Outgoing(hook.url, body.encode(), headers)


# --- leases -------------------------------------------------------------------------------------


def _lease_take(webhook_id: int, now: datetime) -> str | None:
    """The endpoint's lease for this sender, or None while another holds it."""
    token = uuid.uuid4().hex
    free = Q(leased_until__isnull=True) | Q(leased_until__lte=now)
    taken = Webhook.objects.filter(free, pk=webhook_id, enabled=True).update(
        leased_until=now + LEASE, lease_token=token
    )
    return token if taken else None


def _lease_renewed(webhook_id: int, token: str, now: datetime) -> bool:
    held = Webhook.objects.filter(pk=webhook_id, lease_token=token, enabled=True)
    return held.update(leased_until=now + LEASE) == 1


def _lease_release(webhook_id: int, token: str) -> None:
    Webhook.objects.filter(pk=webhook_id, lease_token=token).update(leased_until=None, lease_token="")


def _head_due() -> Subquery:
    """When the oldest pending delivery of the endpoint is due (nothing after it goes first)."""
    pending = WebhookDelivery.objects.filter(webhook=OuterRef("pk"), status=DeliveryStatus.PENDING)
    return Subquery(pending.order_by("id").values("next_attempt_at")[:1])


def _due_endpoints(now: datetime, known: set[int]) -> list[int]:
    """The endpoints, but ``known``, whose oldest pending delivery is due and whose lease is free."""
    free = Q(leased_until__isnull=True) | Q(leased_until__lte=now)
    due = Webhook.objects.filter(free, enabled=True).annotate(head_due=_head_due()).filter(head_due__lte=now)
    return list(due.exclude(pk__in=known).order_by("pk").values_list("pk", flat=True))


def deliveries_next_due() -> datetime | None:
    """When the next delivery may go out (a retry's time, or a lease's end); None: none pending."""
    rows = (
        Webhook.objects.filter(enabled=True)
        .annotate(head_due=_head_due())
        .filter(head_due__isnull=False)
        .values_list("head_due", "leased_until")
    )
    times = [max(due, leased) if leased is not None else due for due, leased in rows]
    return min(times, default=None)


# --- attempts -----------------------------------------------------------------------------------


def _batch_due(webhook_id: int, now: datetime) -> tuple[Webhook | None, list[WebhookDelivery]]:
    """The endpoint, and its oldest pending deliveries that are due, in order, up to a batch: none
    after one that is not due yet; those whose event its creator may no longer read end unsent."""
    hook = Webhook.objects.filter(pk=webhook_id).first()
    if hook is None:
        return None, []
    pending = WebhookDelivery.objects.filter(webhook_id=webhook_id, status=DeliveryStatus.PENDING)
    batch = []
    for delivery in pending.select_related("event__project").order_by("id")[:BATCH_DELIVERIES]:
        if delivery.next_attempt_at > now:
            break
        batch.append(delivery)
    return hook, _still_readable(hook, batch)


def _still_readable(hook: Webhook, batch: list[WebhookDelivery]) -> list[WebhookDelivery]:
    """Those of ``batch`` whose event the endpoint's creator may still read, as when it was queued
    (``_wants``): a delivery queued, or failing and retried for hours, before they lost the
    project is never sent after. The others fail, each with an attempt that says why."""
    if all(delivery.event is None for delivery in batch):  # pings: no event to read
        return batch
    reader = hook.created_by_id
    with access_scope(within=True):
        readable = set(project_ids_with(reader, TRACKER_READ)) if reader is not None else set()
    kept, refused = [], []
    for delivery in batch:
        event = delivery.event
        if event is None or (reader is not None and event_readable(event, user=reader, readable=readable)):
            kept.append(delivery)
        else:
            refused.append(delivery.pk)
    if refused:
        with transaction.atomic():
            WebhookAttempt.objects.bulk_create(
                WebhookAttempt(delivery_id=delivery_id, error=NOT_READABLE) for delivery_id in refused
            )
            WebhookDelivery.objects.filter(pk__in=refused, status=DeliveryStatus.PENDING).update(
                status=DeliveryStatus.FAILED
            )
    return kept


Outcome = tuple[int, webhook_sender.Answer]  # a delivery's id, and what its attempt got


def attempt_record(*, delivery_id: int, answer: webhook_sender.Answer, now: datetime | None = None) -> bool:
    """Log one attempt of the delivery and move it on: delivered, due again after its backoff, or
    failed after its last retry; an endpoint failing too long or too often is disabled. Whether
    it was delivered."""
    return attempts_record([(delivery_id, answer)], now=now) == 1


def attempts_record(
    outcomes: list[Outcome], *, counters_clear: bool = False, now: datetime | None = None
) -> int:
    """Log the attempts of a batch, sent in this order, and move each delivery on as
    :func:`attempt_record` does, in one transaction: the attempts in one INSERT, the deliveries
    delivered in one UPDATE (their endpoints' failure counters reset unless ``counters_clear``,
    known to be zero already), a failure as one attempt. How many were delivered (a delivery
    deleted meanwhile with its webhook is not logged)."""
    now = now or timezone.now()
    with transaction.atomic():
        rows = WebhookDelivery.objects.select_for_update().filter(pk__in=[pk for pk, _ in outcomes])
        present = {
            pk: (webhook_id, attempts)
            for pk, webhook_id, attempts in rows.values_list("pk", "webhook_id", "attempts")
        }
        outcomes = [(pk, answer) for pk, answer in outcomes if pk in present]
        WebhookAttempt.objects.bulk_create(
            WebhookAttempt(
                delivery_id=pk,
                status_code=answer.status_code,
                duration_ms=answer.duration_ms,
                response=answer.response[: webhook_sender.RESPONSE_KEPT],
                error=answer.error[: webhook_sender.MAX_ERROR],
            )
            for pk, answer in outcomes
        )
        delivered = [pk for pk, answer in outcomes if answer.delivered]
        if delivered:
            WebhookDelivery.objects.filter(pk__in=delivered).update(
                status=DeliveryStatus.DELIVERED, delivered_at=now, attempts=F("attempts") + 1
            )
            if not counters_clear:
                hooks = Webhook.objects.filter(pk__in={present[pk][0] for pk in delivered})
                hooks.filter(Q(failures_in_row__gt=0) | Q(failing_since__isnull=False)).update(
                    failing_since=None, failures_in_row=0
                )
        for pk, answer in outcomes:
            if not answer.delivered:
                webhook_id, attempts = present[pk]
                _failure_record(pk, webhook_id, attempts + 1, now)
    return len(delivered)


def _failure_record(delivery_id: int, webhook_id: int, attempts: int, now: datetime) -> None:
    """The delivery's ``attempts``-th attempt failed: due again after its backoff, or failed after
    its last retry; its endpoint one failure further, disabled if it fails too long or too often."""
    rows = WebhookDelivery.objects.filter(pk=delivery_id)
    if attempts > len(RETRY_DELAYS):
        rows.update(attempts=attempts, status=DeliveryStatus.FAILED)
    else:
        rows.update(attempts=attempts, next_attempt_at=now + RETRY_DELAYS[attempts - 1])
    hooks = Webhook.objects.filter(pk=webhook_id)
    since = Coalesce("failing_since", Value(now, output_field=DateTimeField()))
    hooks.update(failures_in_row=F("failures_in_row") + 1, failing_since=since)
    _disable_if_failing(hooks.get(), now)


def _disable_if_failing(hook: Webhook, now: datetime) -> None:
    if not hook.enabled:
        return
    if hook.failures_in_row >= DISABLE_AFTER_FAILURES:
        webhook_disable(hook, f"Disabled after {hook.failures_in_row} failed attempts in a row.")
    elif hook.failing_since is not None and now - hook.failing_since >= DISABLE_AFTER:
        webhook_disable(hook, "Disabled after failing for a day.")


def webhook_disable(hook: Webhook, reason: str, *, notify: bool = True) -> bool:
    """Disable the endpoint: its pending deliveries fail, and (``notify``) its project's owners are
    told. Whether it was enabled."""
    with transaction.atomic():
        changed = Webhook.objects.filter(pk=hook.pk, enabled=True).update(
            enabled=False, disabled_reason=reason[:300], leased_until=None, lease_token=""
        )
        if not changed:
            return False
        WebhookDelivery.objects.filter(webhook_id=hook.pk, status=DeliveryStatus.PENDING).update(
            status=DeliveryStatus.FAILED
        )
        hook.enabled, hook.disabled_reason = False, reason[:300]
        if notify:
            webhook_disabled_notify(hook)
    return True


def webhook_disabled_notify(webhook: Webhook) -> list[Notice]:
    """Tell each owner of the webhook's project that it was disabled and why: in their inbox at
    once, and by mail as their preference for webhooks says (docs/events.md#people)."""
    project = webhook.project
    owners = Membership.objects.filter(project=project, role=Role.OWNER, user__is_active=True)
    title = f"Webhook “{webhook.name}” of {project.key} was disabled: {webhook.disabled_reason}"
    url = reverse("webhook", args=[project.key, webhook.pk])
    user_ids = list(owners.values_list("user_id", flat=True).order_by("user_id"))
    return notifications.notify_users(user_ids, NotifyKind.WEBHOOK, title[:300], url, project)


def deliveries_bring_forward(webhook_id: int) -> None:
    """The endpoint's oldest pending delivery is due now (an owner asked for a send)."""
    head = (
        WebhookDelivery.objects.filter(webhook_id=webhook_id, status=DeliveryStatus.PENDING)
        .order_by("id")
        .values("id")[:1]
    )
    WebhookDelivery.objects.filter(pk__in=Subquery(head)).update(next_attempt_at=timezone.now())


# --- the sender ---------------------------------------------------------------------------------

_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_pool_lock = threading.Lock()


def _sending_pool() -> ThreadPoolExecutor:
    """This process's threads that talk HTTP (made afresh in a forked worker)."""
    global _pool, _pool_pid  # noqa: PLW0603 - one pool per process, made on first use
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(max_workers=SENDING_THREADS, thread_name_prefix="webhooks")
            _pool_pid = os.getpid()
        return _pool


@dataclass(frozen=True)
class Flight:
    """A batch of an endpoint's deliveries on its way, under the endpoint's lease."""

    webhook_id: int
    token: str
    delivery_ids: tuple[int, ...]
    counters_clear: bool  # the endpoint's failure counters were zero when the batch was read


@dataclass
class SendRun:
    """What one :func:`deliveries_send` did, and when the next delivery may go out."""

    delivered: int = 0
    failed: int = 0
    next_due: datetime | None = None


class _Sender:
    """The run's state: the batches on their way (one a thread at most), the leases held, and the
    due endpoints found but not yet sent to (their turn comes as threads come free)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.allow_private = settings.BALLET_WEBHOOKS.allow_private
        self.flights: dict[Future[list[webhook_sender.Answer]], Flight] = {}
        self.leases: dict[int, str] = {}
        self.waiting: deque[int] = deque()
        self.looked_at = -LOOK_AGAIN_SECONDS  # time.monotonic of the last look for due endpoints
        self.freed = True  # a thread came free since then
        self.run = SendRun()

    def look(self) -> None:
        """Find the due endpoints: when a thread came free and no endpoint waits for one, and
        every LOOK_AGAIN_SECONDS (new deliveries, retries come due)."""
        idle = len(self.flights) < SENDING_THREADS and self.freed and not self.waiting
        if not idle and time.monotonic() - self.looked_at < LOOK_AGAIN_SECONDS:
            return
        self.looked_at, self.freed = time.monotonic(), False
        self.waiting.extend(_due_endpoints(timezone.now(), {*self.leases, *self.waiting}))

    def fill(self) -> None:
        """Send to the waiting endpoints while a thread is free, each under its lease."""
        while self.waiting and len(self.flights) < SENDING_THREADS:
            webhook_id = self.waiting.popleft()
            token = _lease_take(webhook_id, timezone.now())
            if token is not None:
                self.leases[webhook_id] = token
                self.launch(webhook_id, renew=False)

    def launch(self, webhook_id: int, *, renew: bool = True) -> None:
        """Send the endpoint's due deliveries, a batch, in order; if none is due, give its lease back."""
        token, now = self.leases[webhook_id], timezone.now()
        held_from = time.monotonic()
        if renew and not _lease_renewed(webhook_id, token, now):
            self.release(webhook_id)
            return
        hook, batch = _batch_due(webhook_id, now)
        if hook is None or not batch:
            self.release(webhook_id)
            return
        future: Future[list[webhook_sender.Answer]]
        secret = crypto.decrypt(hook.secret)
        if secret is None:
            batch = batch[:1]
            future = Future()
            future.set_result([webhook_sender.Answer(None, 0, "", KEY_CHANGED)])
        else:
            future = _sending_pool().submit(
                webhook_sender.post_in_order,
                [_outgoing(delivery, hook, secret, now) for delivery in batch],
                allow_private=self.allow_private,
                timeout=self.timeout,
                until=held_from + BATCH_SECONDS,
            )
        clear = hook.failures_in_row == 0 and hook.failing_since is None
        self.flights[future] = Flight(webhook_id, token, tuple(d.pk for d in batch), clear)

    def land(self, future: Future[list[webhook_sender.Answer]], *, go_on: bool) -> None:
        """Record a batch's attempts; go on with the endpoint's next batch if every one was
        delivered (after the endpoints waiting for a thread, if any)."""
        flight = self.flights.pop(future)
        answers = future.result()
        delivered = attempts_record(
            list(zip(flight.delivery_ids, answers, strict=False)), counters_clear=flight.counters_clear
        )
        self.run.delivered += delivered
        self.run.failed += len(answers) - delivered
        whole = delivered == len(answers)
        if go_on and whole and not self.waiting:
            self.launch(flight.webhook_id)
            return
        self.release(flight.webhook_id)
        if go_on and whole:
            self.waiting.append(flight.webhook_id)

    def release(self, webhook_id: int) -> None:
        token = self.leases.pop(webhook_id, None)
        self.freed = True
        if token is not None:
            _lease_release(webhook_id, token)


def deliveries_send(
    *,
    stop: threading.Event | None = None,
    within: float = RUN_SECONDS,
    timeout: float = webhook_sender.TIMEOUT_SECONDS,
) -> SendRun:
    """Send every due delivery, endpoints at once, each in order; return once nothing is on its
    way. New deliveries are taken for ``within`` seconds (or until ``stop``), then what is on its
    way is finished. Call from a thread that may wait (a worker, the embedded loop's thread)."""
    sender = _Sender(timeout)
    started = time.monotonic()
    try:
        while True:
            taking = time.monotonic() - started < within and not (stop is not None and stop.is_set())
            if taking:
                sender.look()
                sender.fill()
            if not sender.flights:
                break
            done, _ = wait(list(sender.flights), timeout=LOOK_AGAIN_SECONDS, return_when=FIRST_COMPLETED)
            for future in done:
                sender.land(future, go_on=taking)
    finally:
        for webhook_id in list(sender.leases):
            sender.release(webhook_id)
    sender.run.next_due = deliveries_next_due()
    return sender.run
