"""Git repositories linked to a project, read only (SPEC § 16): where one comes from, and how its
mirror stands. The mirror itself lives on disk (``tracker/repos/mirror.py``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tracker.models.access import Project


class Repository(models.Model):
    """A repository an owner linked: an ``https://`` or ``ssh://`` URL, or a local path under
    ``[repositories] local_roots``; the worker keeps a bare mirror of it, fetched every
    ``fetch_minutes`` and on demand."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="repositories")
    name = models.SlugField(max_length=50)  # how the planner's tools name it
    url = models.CharField(max_length=2000, blank=True)  # never with a credential in it
    local_path = models.CharField(max_length=1000, blank=True)  # resolved, under a local root
    default_branch = models.CharField(max_length=200, default="main")
    # Fernet token (tracker.trust.crypto) of a token or password for the URL; write-only.
    credential_encrypted = models.TextField(blank=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="repositories"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # The mirror's state: when the last fetch ended (well or not), the default branch's commit and
    # the mirror's size after the last good one, and why the last one failed (empty: it did not).
    last_fetch_at = models.DateTimeField(null=True, blank=True)
    last_commit = models.CharField(max_length=64, blank=True)
    size_bytes = models.BigIntegerField(default=0)
    last_error = models.TextField(blank=True)
    # An owner asked for a fetch (Fetch now): due at once, whatever fetch_minutes says.
    fetch_requested_at = models.DateTimeField(null=True, blank=True)
    # A fetch on its way, since when: another one waits (a dead worker's claim ends after a timeout).
    fetching_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="repository_name_unique_in_project"),
        ]

    def __str__(self) -> str:
        return f"repository {self.pk} of {self.project_id}: {self.name}"

    @property
    def has_credential(self) -> bool:
        return bool(self.credential_encrypted)

    @property
    def source(self) -> str:
        """What it is fetched from: its URL or its local path."""
        return self.url or self.local_path

    @property
    def fetching(self) -> bool:
        return self.fetching_since is not None
