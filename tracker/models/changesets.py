"""Plan changesets: proposed operations a human applies or rejects."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tracker.models.access import Project


class ChangesetStatus(models.TextChoices):
    PROPOSED = "proposed"
    APPLIED = "applied"
    REJECTED = "rejected"
    CONFLICTED = "conflicted"


class Changeset(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="changesets")
    number = models.PositiveIntegerField()
    title = models.CharField(max_length=200)
    rationale = models.TextField(blank=True)
    status = models.CharField(
        max_length=20, choices=ChangesetStatus.choices, default=ChangesetStatus.PROPOSED
    )
    operations = models.JSONField(default=list)
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="proposed_changesets"
    )
    # The planner session that proposed it, if any (tracker never imports planner).
    planner_session = models.UUIDField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="decided_changesets",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)
    # Why applying failed, for a conflicted changeset.
    conflict_reason = models.TextField(blank=True)
    # Keys of the items the changeset created, by ref, once applied.
    created_items = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project__key", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["project", "number"], name="changeset_number_unique"),
        ]
        indexes = [models.Index(fields=["project", "status"])]

    def __str__(self) -> str:
        return f"{self.project.key} changeset #{self.number}: {self.title}"
