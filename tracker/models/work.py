"""Work on the plan (docs/domain.md#work): a worker's claim on a ticket, and its reports."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tracker.models.access import Project
from tracker.models.plan import Item


class ClaimStatus(models.TextChoices):
    """``active`` until the claim ends, which every other status names (its outcome). An active
    claim whose lease ran out holds nothing and reads as ``expired`` before the sweep writes it
    (``tracker.work_selectors.held``)."""

    ACTIVE = "active"
    DONE = "done"  # a done report
    BLOCKED = "blocked"  # a blocked report
    FAILED = "failed"  # a failed report
    RELEASED = "released"  # its holder, or a human with tracker.write, let it go
    EXPIRED = "expired"  # the lease ran out


CLAIM_OUTCOMES = tuple(status for status in ClaimStatus if status != ClaimStatus.ACTIVE)


class Claim(models.Model):
    """A worker holds a runnable ticket for a lease renewed by heartbeats and reports."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="claims")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="claims")
    holder = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="claims")
    status = models.CharField(max_length=20, choices=ClaimStatus.choices, default=ClaimStatus.ACTIVE)
    created_at = models.DateTimeField(auto_now_add=True)
    renewed_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    # Why it ended, in words: the report's kind and summary head, who released it, when the lease ran out.
    end_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            # One active claim per ticket, whichever process serves the racing workers.
            models.UniqueConstraint(
                fields=["item"], condition=models.Q(status="active"), name="claim_one_active_per_item"
            ),
        ]
        indexes = [
            models.Index(fields=["project", "status"]),
            models.Index(fields=["status", "expires_at"]),
        ]

    # Not stored: set by ``claim_take`` when its holder claimed again what it holds (a retry):
    # the claim renewed, not a new one.
    retaken = False

    def __str__(self) -> str:
        return f"Claim {self.pk} on {self.item_id} ({self.status})"


class Sweep(models.Model):
    """When a periodic sweep last finished (``leases``: the one that ends the claims whose lease ran
    out), one row per sweep, for /metrics and /healthz in every process (docs/operations.md#health)."""

    name = models.CharField(max_length=50, primary_key=True)
    finished_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"Sweep {self.name} at {self.finished_at.isoformat()}"


class ReportKind(models.TextChoices):
    PROGRESS = "progress"
    DONE = "done"
    BLOCKED = "blocked"
    FAILED = "failed"


class Report(models.Model):
    """What the claim's holder says it did: Markdown stored verbatim, links, and free details."""

    claim = models.ForeignKey(Claim, on_delete=models.CASCADE, related_name="reports")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="reports")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="reports")
    kind = models.CharField(max_length=20, choices=ReportKind.choices)
    summary = models.TextField()
    links = models.JSONField(default=list, blank=True)  # http(s) URLs
    details = models.JSONField(default=dict, blank=True)
    # The reporter's own key for the report: reporting again with it returns this report.
    idempotency_key = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    # Not stored: set by ``report_add`` when the report came again with its idempotency key.
    replayed = False

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["item", "kind"])]
        constraints = [
            models.UniqueConstraint(
                fields=["claim", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="report_one_per_idempotency_key",
            ),
        ]

    def __str__(self) -> str:
        return f"Report {self.pk} ({self.kind}) on claim {self.claim_id}"
