"""Who fetches the mirrors (SPEC § 16): production's worker (``tracker.fetch_repositories``, run by
beat every minute and queued when an owner links a repository or asks for a fetch), the embedded
server's own loop (``ballet/lifespan.py``), woken by the same request; a broker that is down fails
no write."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from ballet import lifespan
from tests.tracker.repo_helpers import configured, source_repo
from tracker.models import Repository
from tracker.repo_tasks import fetch_repositories
from tracker.services import repositories
from tracker.services.activity import Actor
from tracker.services.repositories import FETCH_TASK, repository_fetch_request, repository_link


def test_beat_runs_the_fetch_every_minute_and_workers_load_it(settings):
    assert {"task": FETCH_TASK, "schedule": 60.0} in settings.CELERY_BEAT_SCHEDULE.values()
    assert "tracker.repo_tasks" in settings.CELERY_IMPORTS


async def test_the_embedded_server_fetches_itself_and_production_leaves_it_to_the_worker(settings):
    assert lifespan.repository_fetches.started is (not settings.PRODUCTION_MODE)


@pytest.mark.django_db
def test_the_worker_s_task_fetches_what_is_due(owner, project, settings, tmp_path, monkeypatch):
    monkeypatch.setattr(repositories, "fetch_kick", lambda: None)
    roots = configured(settings, tmp_path)
    source = source_repo(roots / "app")
    repository_link(actor=Actor(user=owner), project=project, name="app", local_path=str(source))

    assert fetch_repositories() == 1
    assert fetch_repositories() == 0  # fetched: not due again for fetch_minutes

    assert Repository.objects.get().last_commit


class Publisher:
    def __init__(self, fails: bool = False) -> None:
        self.sent: list[str] = []
        self.fails = fails

    def send_task(self, name: str, *args: Any, **kwargs: Any) -> None:
        if self.fails:
            raise ConnectionError("redis is down")
        self.sent.append(name)


@pytest.mark.django_db
def test_in_production_fetch_now_queues_the_worker_s_task_once_committed(
    owner, project, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.ONE_PROCESS = False
    publisher = Publisher()
    monkeypatch.setattr(repositories, "current_app", publisher)
    repo = repository_link(
        actor=Actor(user=owner), project=project, name="app", url="https://g.example.com/a.git"
    )

    with django_capture_on_commit_callbacks(execute=True):
        repository_fetch_request(actor=Actor(user=owner), project=project, repository_id=repo.pk)

    assert publisher.sent == [FETCH_TASK]


@pytest.mark.django_db
def test_a_broker_that_is_down_fails_no_link(
    owner, project, settings, monkeypatch, caplog, django_capture_on_commit_callbacks
):
    settings.ONE_PROCESS = False
    monkeypatch.setattr(repositories, "current_app", Publisher(fails=True))

    with django_capture_on_commit_callbacks(execute=True):
        repo = repository_link(
            actor=Actor(user=owner), project=project, name="app", url="https://g.example.com/a.git"
        )

    assert Repository.objects.get(pk=repo.pk).fetch_requested_at is not None  # beat fetches it
    assert "could not queue tracker.fetch_repositories" in caplog.text


async def test_the_server_s_loop_fetches_when_its_bell_rings(monkeypatch, caplog):
    runs: list[int] = []

    def flaky() -> int:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("database gone")
        return 0

    monkeypatch.setattr(repositories, "repositories_fetch_due", flaky)
    monkeypatch.setattr(lifespan, "close_old_connections", lambda: None)
    caplog.set_level(logging.ERROR, logger="ballet.lifespan")
    await lifespan.repository_fetches.stop()  # the live side's own loop: only this one listens
    loop = lifespan.RepositoryFetches(tick=60.0)
    await loop.start()
    try:
        for expected in (1, 2):
            await asyncio.sleep(0.05)  # the loop listens for the bell
            repositories.bell.ring()
            for _ in range(100):
                if len(runs) >= expected:
                    break
                await asyncio.sleep(0.02)
    finally:
        await loop.stop()

    assert len(runs) == 2  # a failed run is logged and the next one runs
    assert "fetching repositories failed" in caplog.text
