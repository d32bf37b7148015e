"""Events (docs/events.md): every activity as a typed event, and the webhooks that receive them.

An event is recorded in the transaction of the activity it reports (``tracker/services/events.py``),
and so is every delivery it makes: the deliveries table is an outbox the worker empties.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tracker.models.access import Organization, Project


class Event(models.Model):
    """What happened, for the feed, webhooks and notifications. Its id increases across the
    installation; within an organization, ids are allocated under the organization's row lock
    (the activity counter's), so they increase in commit order there."""

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="events")
    # Null for organization-wide knowledge: it is every project's of the organization.
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, related_name="events"
    )
    type = models.CharField(max_length=50)
    actor = models.CharField(max_length=100)
    on_behalf_of = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    target = models.CharField(max_length=200)
    data = models.JSONField(default=dict, blank=True)
    # Who may read it besides the project's readers: every one of these projects must be readable
    # too (knowledge linked to several); only this user, when set (a request of their chat).
    requires = models.JSONField(default=list, blank=True)
    private_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["project", "id"]),
            models.Index(fields=["organization", "id"]),
        ]

    def __str__(self) -> str:
        return f"event {self.pk} {self.type} {self.target}"


class WebhookFormat(models.TextChoices):
    STANDARD = "standard"  # Standard Webhooks: signed JSON
    SLACK = "slack"  # a Slack incoming-webhook message


class Webhook(models.Model):
    """An endpoint an owner registered for a project's events."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="webhooks")
    name = models.CharField(max_length=100)
    url = models.CharField(max_length=2000)
    types = models.JSONField(default=list, blank=True)  # empty: every type
    format = models.CharField(max_length=20, choices=WebhookFormat.choices, default=WebhookFormat.STANDARD)
    secret = models.TextField()  # encrypted (tracker.trust.crypto); shown once, when created
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="webhooks"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Since when every attempt failed, and how many deliveries in a row did (docs/events.md#webhooks).
    failing_since = models.DateTimeField(null=True, blank=True)
    failures_in_row = models.PositiveIntegerField(default=0)
    # One sender at a time per endpoint, in order: who holds it, until when (a dead one's lease ends).
    leased_until = models.DateTimeField(null=True, blank=True)
    lease_token = models.CharField(max_length=40, blank=True)

    class Meta:
        ordering = ["project", "pk"]

    def __str__(self) -> str:
        return f"webhook {self.pk} of {self.project_id}: {self.name}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"  # to be sent, or sent again at next_attempt_at
    DELIVERED = "delivered"
    FAILED = "failed"  # every retry failed, or the endpoint was disabled


class WebhookDelivery(models.Model):
    """One event for one endpoint: queued with the event, sent at least once, in order."""

    id = models.BigAutoField(primary_key=True)
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(
        Event, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries"
    )
    msg_id = models.CharField(max_length=60, unique=True)  # webhook-id: the same on every attempt
    type = models.CharField(max_length=50)
    payload = models.JSONField(default=dict)  # the body's data (a ping's; an event's is the event's)
    status = models.CharField(max_length=20, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["webhook", "id"]
        indexes = [
            models.Index(fields=["webhook", "status", "id"]),
            models.Index(fields=["status", "next_attempt_at"]),
        ]

    def __str__(self) -> str:
        return f"delivery {self.msg_id} ({self.status})"


class WebhookAttempt(models.Model):
    """One try of a delivery, as owners see it."""

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log")
    at = models.DateTimeField(auto_now_add=True)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    response = models.TextField(blank=True)  # the first KB of the answer
    error = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["delivery", "pk"]

    def __str__(self) -> str:
        return f"attempt {self.pk} of {self.delivery_id}: {self.status_code or self.error}"
