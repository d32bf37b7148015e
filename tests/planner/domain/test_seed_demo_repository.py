"""``manage.py seed_demo``'s Git repository (SPEC § 16): the Courtside skeleton made under
DEMO_REPOSITORY_ROOT with fixed commits, linked to DEMO by path, its mirror fetched at once, kept
by a second run; its ``.env`` denied; the seed's folder not linkable by an owner."""

from __future__ import annotations

import subprocess
import time
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from ballet.env import RepositoriesTable
from tracker.management import demo_repository
from tracker.models import ActivityEvent, Project, Repository
from tracker.repos import reads
from tracker.repos.selectors import mirror_path

pytestmark = pytest.mark.django_db


@pytest.fixture
def places(settings, tmp_path: Path) -> Path:
    settings.REPOSITORIES_PATH = tmp_path / "mirrors"
    settings.DEMO_REPOSITORY_ROOT = tmp_path / "demo"
    settings.BALLET_REPOSITORIES = RepositoriesTable()  # local_roots empty, as by default
    return tmp_path / "demo"


def seed() -> str:
    out = StringIO()
    call_command("seed_demo", "--password", "pw", stdout=out)
    return out.getvalue()


def git(where: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=where, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_the_seed_makes_links_and_fetches_the_demo_repository(places):
    out = seed()

    source = places / demo_repository.NAME
    assert (source / "bookings" / "models.py").is_file()
    assert git(source, "rev-list", "--count", "HEAD") == str(len(demo_repository.COMMITS))
    repo = Repository.objects.get(project__key="DEMO")
    assert (repo.name, repo.url, repo.default_branch) == ("courtside", "", "main")
    assert repo.local_path == str(source.resolve())
    assert repo.last_commit == git(source, "rev-parse", "HEAD")
    assert repo.last_error == ""
    assert git(mirror_path(repo), "rev-parse", "main") == repo.last_commit
    assert f"repository courtside (made at {source}): mirror at {repo.last_commit[:12]}" in out
    assert ActivityEvent.objects.filter(verb="repository.linked", target=f"repository:{repo.pk}").count() == 1


def test_the_demo_repository_has_the_same_commits_wherever_it_is_made(tmp_path):
    first, _ = demo_repository.demo_repository_ensure(tmp_path / "one")
    second, made = demo_repository.demo_repository_ensure(tmp_path / "two")

    assert made
    assert git(first, "rev-parse", "HEAD") == git(second, "rev-parse", "HEAD")
    assert git(first, "log", "--format=%an %aI", "-1") == "Dana Reyes 2026-03-18T16:20:00+00:00"


def test_a_second_seed_keeps_the_repository_its_link_and_its_mirror(places):
    seed()
    repo = Repository.objects.get(project__key="DEMO")
    head = git(places / demo_repository.NAME, "rev-parse", "HEAD")
    (places / demo_repository.NAME / "NOTES.md").write_text("the operator's own notes\n")

    out = seed()

    again = Repository.objects.get(project__key="DEMO")
    assert (again.pk, again.last_commit, again.last_fetch_at) == (
        repo.pk,
        repo.last_commit,
        repo.last_fetch_at,
    )
    assert git(places / demo_repository.NAME, "rev-parse", "HEAD") == head
    assert (places / demo_repository.NAME / "NOTES.md").is_file()  # kept as it was
    assert f"repository courtside (kept at {places / demo_repository.NAME})" in out
    assert ActivityEvent.objects.filter(verb="repository.linked").count() == 1


def test_the_denied_env_file_is_in_the_repository_but_never_found(places):
    seed()
    repo = Repository.objects.get(project__key="DEMO")
    assert demo_repository.FAKE_SECRET in (places / demo_repository.NAME / ".env").read_text()

    found = reads.search(mirror_path(repo), "main", demo_repository.FAKE_SECRET)
    booking = reads.search(mirror_path(repo), "main", "class Booking")

    assert found["hits"] == []
    assert [hit["path"] for hit in booking["hits"]] == ["bookings/models.py"]


def test_an_owner_cannot_link_the_seeds_folder(places):
    """The seed's own root is its alone: over REST, local paths follow local_roots (empty)."""
    seed()
    owner = User.objects.get(username="demo")
    client = APIClient()
    client.force_authenticate(owner)
    project = Project.objects.get(key="DEMO")

    answer = client.post(
        f"/api/v1/projects/{project.key}/repositories/",
        {"name": "again", "local_path": str(places / demo_repository.NAME)},
        format="json",
    )

    assert answer.status_code == 400, answer.content
    assert "local_roots is empty" in str(answer.json())
    assert Repository.objects.filter(project=project).count() == 1


def test_a_fetch_another_process_has_on_its_way_is_waited_for(places, monkeypatch):
    """The link wakes the embedded server's loop (or a worker), which may claim the first fetch:
    the seed waits for that one to end rather than report a repository never fetched."""
    from planner.management.commands import seed_demo as command  # noqa: PLC0415

    real_fetch, real_sleep = command.repository_fetch, time.sleep
    waits: list[float] = []

    def claimed_elsewhere(repository_id: int) -> None:
        Repository.objects.filter(pk=repository_id).update(fetching_since=timezone.now())

    def meanwhile(seconds: float) -> None:  # the other process's fetch ends while the seed waits
        if seconds != command.FETCH_POLL:
            real_sleep(seconds)
            return
        waits.append(seconds)
        if len(waits) == 2:
            repo = Repository.objects.get(project__key="DEMO")
            Repository.objects.filter(pk=repo.pk).update(fetching_since=None)
            real_fetch(repo.pk)

    monkeypatch.setattr(command, "repository_fetch", claimed_elsewhere)
    monkeypatch.setattr(command.time, "sleep", meanwhile)
    out = seed()

    repo = Repository.objects.get(project__key="DEMO")
    assert len(waits) == 2
    assert repo.last_commit
    assert f"mirror at {repo.last_commit[:12]}" in out
