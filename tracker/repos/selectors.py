"""Reads about a project's linked repositories (SPEC § 16): which they are, where their mirrors
live. The planner's tools and the read layer (``tracker/repos/reads.py``) start here; the writes
are ``tracker.services.repositories``'s."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from tracker.errors import NotFoundError
from tracker.inputs import MAX_BIG_ID
from tracker.models import Project, Repository


def mirror_path(repo: Repository) -> Path:
    """The bare mirror of ``repo``: ``<[repositories] path>/<project id>/<repository id>.git`` (it
    exists once a fetch succeeded)."""
    return Path(settings.REPOSITORIES_PATH) / str(repo.project_id) / f"{repo.pk}.git"


def repositories_of(project: Project) -> list[Repository]:
    """The project's repositories, by name."""
    return list(Repository.objects.filter(project=project).select_related("created_by").order_by("name"))


def repository_get(*, project: Project, repository_id: int) -> Repository:
    """The project's repository ``repository_id``; NotFoundError for another project's."""
    found = (
        Repository.objects.filter(project=project, pk=repository_id)
        .select_related("created_by", "project")
        .first()
        if 0 < repository_id <= MAX_BIG_ID
        else None
    )
    if found is None:
        raise NotFoundError(f"Repository {repository_id} not found in {project.key}.")
    return found
