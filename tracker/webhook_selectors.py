"""Reads about a project's webhooks and their deliveries, as its owners see them (the webhook pages
and REST; ``tracker.services.webhook_endpoints`` for the writes, docs/events.md#webhooks)."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from tracker.errors import NotFoundError
from tracker.inputs import MAX_BIG_ID
from tracker.models import Project, Webhook, WebhookAttempt, WebhookDelivery

MAX_LISTED = 50  # the deliveries a page shows, newest first


def webhook_list(*, project: Project) -> QuerySet[Webhook]:
    """The project's webhooks, oldest first."""
    return Webhook.objects.filter(project=project).select_related("created_by").order_by("pk")


def webhook_get(*, project: Project, webhook_id: int) -> Webhook:
    """The project's webhook ``webhook_id``; NotFoundError for another project's."""
    found = (
        Webhook.objects.filter(project=project, pk=webhook_id).select_related("created_by", "project").first()
        if 0 < webhook_id <= MAX_BIG_ID
        else None
    )
    if found is None:
        raise NotFoundError(f"Webhook {webhook_id} not found in {project.key}.")
    return found


def delivery_list(*, webhook: Webhook) -> QuerySet[WebhookDelivery]:
    """The webhook's deliveries, newest first, each with its attempts in order."""
    attempts = Prefetch("attempt_log", queryset=WebhookAttempt.objects.order_by("pk"))
    return WebhookDelivery.objects.filter(webhook=webhook).prefetch_related(attempts).order_by("-id")


def delivery_get(*, webhook: Webhook, delivery_id: int) -> WebhookDelivery:
    """The webhook's delivery ``delivery_id``; NotFoundError for another webhook's."""
    found = (
        WebhookDelivery.objects.filter(webhook=webhook, pk=delivery_id).first()
        if 0 < delivery_id <= MAX_BIG_ID
        else None
    )
    if found is None:
        raise NotFoundError(f"Delivery {delivery_id} not found.")
    return found
