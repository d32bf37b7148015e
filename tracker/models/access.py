"""Organizations, projects and memberships with their roles."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

PROJECT_KEY_VALIDATOR = RegexValidator(
    r"^[A-Z][A-Z0-9]{1,9}$", "A project key is 2 to 10 uppercase letters or digits."
)


class Organization(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    # Head of the organization's activity log; the next event takes activity_seq + 1.
    activity_seq = models.BigIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Project(models.Model):
    # Whether the project links a Git repository, where a hot path read it with the project's row
    # (planner/domain/services/sessions/rows.py); None: not read (ask tracker.repos.selectors).
    linked_repositories: bool | None = None

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="projects")
    key = models.CharField(max_length=10, unique=True, validators=[PROJECT_KEY_VALIDATOR])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # Per-project overrides of settings ([planner], [work], [questions]: ballet.env.PROJECT_SETTINGS).
    settings = models.JSONField(default=dict, blank=True)
    # Fernet token of the project's LLM credential; never returned by any API.
    credential_encrypted = models.TextField(blank=True, editable=False)
    next_item_number = models.PositiveIntegerField(default=1, editable=False)
    next_changeset_number = models.PositiveIntegerField(default=1, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return f"{self.key} · {self.name}"

    @property
    def has_credential(self) -> bool:
        return bool(self.credential_encrypted)


class Role(models.TextChoices):
    VIEWER = "viewer"
    MEMBER = "member"
    MAINTAINER = "maintainer"
    OWNER = "owner"


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project__key", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user} · {self.project.key} · {self.role}"
