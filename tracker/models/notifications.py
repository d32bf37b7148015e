"""People's notifications (docs/events.md#people): their preferences per kind, and the mail outbox."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tracker.models.access import Project
from tracker.models.events import Event


class NotifyKind(models.TextChoices):
    QUESTION = "question"  # an agent's question needs a human
    APPROVAL = "approval"  # a request or approval of the planner waits for them
    CHANGESET = "changeset"  # a changeset waits for their decision
    TICKET = "ticket"  # a ticket they proposed, claimed or watch moved
    MENTION = "mention"
    CLAIM = "claim"  # their claim expired
    WEBHOOK = "webhook"  # their webhook was disabled
    INVITATION = "invitation"


class NotifyMode(models.TextChoices):
    NOW = "now"
    DIGEST = "digest"
    OFF = "off"


class NotificationPreference(models.Model):
    """A user's choice for one kind; without a row, the kind's default (docs/events.md#people)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notify_prefs")
    kind = models.CharField(max_length=20, choices=NotifyKind.choices)
    mode = models.CharField(max_length=10, choices=NotifyMode.choices)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "kind"], name="notify_pref_unique")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.kind}: {self.mode}"


class MailStatus(models.TextChoices):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"


class Mail(models.Model):
    """A notification to send by mail, queued in the transaction of its event (an outbox): sent at
    once (``now``) or in the user's next daily digest (``digest``)."""

    id = models.BigAutoField(primary_key=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mails")
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    event = models.ForeignKey(Event, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    kind = models.CharField(max_length=20, choices=NotifyKind.choices)
    mode = models.CharField(max_length=10, choices=NotifyMode.choices)
    subject = models.CharField(max_length=300)
    body = models.TextField()
    url = models.CharField(max_length=300, blank=True)
    status = models.CharField(max_length=20, choices=MailStatus.choices, default=MailStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    # Not before then: a sender took it (a lease: a sender that died leaves it to the next one
    # once it ends), or a failed attempt waits to be tried again (docs/events.md#e-mail).
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["status", "mode", "id"])]

    def __str__(self) -> str:
        return f"mail {self.pk} to {self.user_id} ({self.kind}, {self.status})"
