"""What people do around the plan besides changing it: comments and mentions, watching a ticket,
invitations to a project, and the inbox's own entries and dismissals (docs/domain.md#people)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tracker.models.access import Project, Role
from tracker.models.plan import Item


class Comment(models.Model):
    """A person's Markdown note on an item; ``@name`` mentions of the project's members."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="comments")
    body = models.TextField()
    mentions = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="mentioned_in")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"Comment {self.pk} on item {self.item_id}"


class Watch(models.Model):
    """A user follows an item."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="watches")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="watches")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "user"], name="watch_unique")]

    def __str__(self) -> str:
        return f"{self.user_id} watches {self.item_id}"


class InvitationStatus(models.TextChoices):
    PENDING = "pending"
    ACCEPTED = "accepted"
    DECLINED = "declined"
    CANCELLED = "cancelled"


class Invitation(models.Model):
    """An owner asks a user to join a project with a role; the user joins only by accepting."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="invitations")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.MEMBER)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(
        max_length=20, choices=InvitationStatus.choices, default=InvitationStatus.PENDING
    )
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "user"],
                condition=models.Q(status="pending"),
                name="invitation_one_pending",
            ),
        ]

    def __str__(self) -> str:
        return f"Invitation {self.pk} of {self.user_id} to {self.project_id} ({self.status})"


class Notice(models.Model):
    """An inbox entry that is not derived from the plan's state: a mention, a revoked key."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notices")
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, related_name="notices"
    )
    kind = models.CharField(max_length=30)
    title = models.CharField(max_length=300)
    url = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["user", "created_at"])]

    def __str__(self) -> str:
        return f"Notice {self.pk} ({self.kind}) for {self.user_id}"


class Dismissal(models.Model):
    """A user put an inbox entry away; ``entry`` is the entry's id (``changeset-12``, ``notice-4``)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="dismissals")
    entry = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "entry"], name="dismissal_unique")]

    def __str__(self) -> str:
        return f"{self.user_id} dismissed {self.entry}"
