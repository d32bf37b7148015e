"""Knowledge entries, their revisions and their links to projects and items."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tracker.models import Item, Organization, Project


class KnowledgeKind(models.TextChoices):
    DOCUMENT = "document"
    DECISION = "decision"
    NOTE = "note"
    DEBT = "debt"


class KnowledgeEntry(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="knowledge")
    kind = models.CharField(max_length=20, choices=KnowledgeKind.choices)
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=1)
    # Always humans: what the planner writes is attributed to the human it acts for.
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="knowledge_authored"
    )
    last_editor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="knowledge_edited"
    )
    projects = models.ManyToManyField(Project, blank=True, related_name="knowledge")
    items = models.ManyToManyField(Item, blank=True, related_name="knowledge")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        verbose_name_plural = "knowledge entries"
        indexes = [models.Index(fields=["organization", "kind"])]

    def __str__(self) -> str:
        return f"{self.kind}: {self.title}"


class KnowledgeRevision(models.Model):
    """The entry as it was at ``version``; one row per version, the first included."""

    entry = models.ForeignKey(KnowledgeEntry, on_delete=models.CASCADE, related_name="revisions")
    version = models.PositiveIntegerField()
    kind = models.CharField(max_length=20, choices=KnowledgeKind.choices)
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    editor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    actor = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["entry", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["entry", "version"], name="knowledge_revision_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.entry.title} v{self.version}"
