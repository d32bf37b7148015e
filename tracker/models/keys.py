"""API keys: named, scoped, expiring, revocable credentials of a user, stored only as a hash."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Scope(models.TextChoices):
    """What a key may do, within its user's roles (``docs/api-keys.md``)."""

    READ = "read", "read: the plan, knowledge, search and questions"
    ASK = "ask", "ask: ask and withdraw questions"
    WORK = "work", "work: claims and reports"
    PLAN = "plan", "plan: propose changesets, write knowledge and skills, planner chats"


class KeyStatus(models.TextChoices):
    ACTIVE = "active"
    EXPIRED = "expired"
    REVOKED = "revoked"


class ApiKey(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    # Shown to tell keys apart and used to find the key; the secret is kept only as its SHA-256.
    prefix = models.CharField(max_length=12, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    scopes = models.JSONField(default=list)  # Scope values, in Scope's order
    expires_at = models.DateTimeField(null=True, blank=True)
    # Bound to these projects, the key acts only there; unbound, wherever its user may act.
    projects = models.ManyToManyField("tracker.Project", blank=True, related_name="api_keys")
    # Who made it: its user at /keys/, or a project's owner for an agent.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix})"

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def status(self) -> KeyStatus:
        if self.revoked_at is not None:
            return KeyStatus.REVOKED
        return KeyStatus.EXPIRED if self.expired else KeyStatus.ACTIVE


class Agent(models.Model):
    """A user made by a project's owner for a coding agent: it acts only through its keys and never
    signs in to the pages (docs/api-keys.md#agents)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, primary_key=True, on_delete=models.CASCADE, related_name="agent"
    )
    project = models.ForeignKey("tracker.Project", on_delete=models.CASCADE, related_name="agents")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "user__username"]

    def __str__(self) -> str:
        return f"Agent {self.user_id} of project {self.project_id}"
