"""``/projects/{key}/repositories/``: an owner's page of the project's linked repositories (SPEC
§ 16): link one (refusals shown on the form, nothing stored), each mirror's status and last error,
Fetch now, Unlink; never the credential; the settings page links to it; nobody else gets in."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from tests.tracker.repo_helpers import configured, source_repo
from tracker.models import Repository
from tracker.repos.selectors import mirror_path
from tracker.services import repositories
from tracker.services.activity import Actor
from tracker.services.repositories import repository_fetch, repository_link

pytestmark = pytest.mark.django_db
PAGE = "/projects/BAL/repositories/"
SECRET = "tok-Pag3-s3cret"


@pytest.fixture(autouse=True)
def _nothing_kicked(monkeypatch, settings, tmp_path):
    configured(settings, tmp_path)
    monkeypatch.setattr(repositories, "fetch_kick", lambda: None)


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_owner_links_a_repository_and_never_sees_its_credential_again(owner):
    client = signed_in(owner)
    form = {
        "name": "app",
        "url": "https://git.example.com/a.git",
        "default_branch": "main",
        "credential": SECRET,
    }

    answer = client.post(f"{PAGE}link/", form, follow=True)

    assertContains(answer, "Linked “app”")
    assertContains(answer, "https://git.example.com/a.git")
    assertNotContains(answer, SECRET)
    assert Repository.objects.get().has_credential


def test_a_refused_link_shows_why_on_the_form_and_stores_nothing(owner):
    form = {"name": "app", "url": "https://bob:hunter22@git.example.com/a.git", "default_branch": "main"}

    answer = signed_in(owner).post(f"{PAGE}link/", form)

    assert answer.status_code == 400
    assertContains(answer, "No credential in the URL", status_code=400)
    assert not Repository.objects.exists()


def test_the_page_shows_each_mirror_s_status_and_its_last_error(owner, project, tmp_path):
    source = source_repo(tmp_path / "src" / "app")
    repo = repository_link(actor=Actor(user=owner), project=project, name="app", local_path=str(source))
    good = repository_fetch(repo.pk)
    assert good is not None
    source.rename(tmp_path / "src" / "gone")
    repository_fetch(repo.pk)

    page = signed_in(owner).get(PAGE)

    assertContains(page, good.last_commit[:12])
    assertContains(page, "The last fetch failed; the mirror of")
    assertContains(page, "Fetch now")


def test_fetch_now_and_unlink(owner, project, tmp_path, django_capture_on_commit_callbacks):
    source = source_repo(tmp_path / "src" / "app")
    repo = repository_link(actor=Actor(user=owner), project=project, name="app", local_path=str(source))
    repository_fetch(repo.pk)
    client = signed_in(owner)

    fetched = client.post(f"{PAGE}{repo.pk}/fetch/", follow=True)
    assertContains(fetched, "A fetch of “app” is on its way")
    assert Repository.objects.get().fetch_requested_at is not None
    with django_capture_on_commit_callbacks(execute=True):
        unlinked = client.post(f"{PAGE}{repo.pk}/unlink/", follow=True)

    assertContains(unlinked, "Unlinked “app”")
    assert not Repository.objects.exists()
    assert not mirror_path(repo).exists()


def test_the_settings_page_links_owners_to_the_repositories(owner, project):
    page = signed_in(owner).get("/projects/BAL/settings/")

    assertContains(page, 'href="/projects/BAL/repositories/"')


@pytest.mark.parametrize(("who", "status"), [("viewer", 403), ("maintainer", 403), ("stranger", 404)])
def test_only_owners_get_in(users, owner, project, who, status):
    repo = repository_link(
        actor=Actor(user=owner), project=project, name="app", url="https://git.example.com/a.git"
    )
    client = signed_in(users[who])

    calls = [
        client.get(PAGE),
        client.post(
            f"{PAGE}link/", {"name": "x", "url": "https://g.example.com/x.git", "default_branch": "main"}
        ),
        client.post(f"{PAGE}{repo.pk}/fetch/"),
        client.post(f"{PAGE}{repo.pk}/unlink/"),
    ]

    assert [call.status_code for call in calls] == [status] * len(calls)
    assert list(Repository.objects.values_list("name", "fetch_requested_at")) == [
        ("app", repo.fetch_requested_at)
    ]
