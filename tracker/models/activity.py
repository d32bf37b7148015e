"""The activity log: the audit trail of every change, and the source of change notes."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tracker.models.access import Organization, Project


class ActivityEvent(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="activity")
    # Null for organization-wide changes (organization skills, unlinked knowledge).
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, related_name="activity"
    )
    # Monotonic per organization, allocated under the organization's row lock.
    seq = models.BigIntegerField()
    actor = models.CharField(max_length=100)
    on_behalf_of = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="activity"
    )
    verb = models.CharField(max_length=50)
    target = models.CharField(max_length=200)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["organization", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "seq"], name="activity_seq_unique"),
        ]
        indexes = [models.Index(fields=["project", "seq"])]

    def __str__(self) -> str:
        return f"#{self.seq} {self.actor} {self.verb} {self.target}"
