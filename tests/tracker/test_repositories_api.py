"""``/api/v1/projects/{key}/repositories/`` (SPEC § 16): owners link, change, unlink and fetch
repositories; readers see them and how their mirrors stand, never a credential; each refused input
is a readable 400 with nothing stored; nobody else learns a repository exists."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import make_key, make_membership, make_project, make_user
from tests.tracker.repo_helpers import configured, source_repo
from tracker.models import ActivityEvent, Repository, Role
from tracker.repos.selectors import mirror_path
from tracker.services import repositories
from tracker.services.activity import Actor
from tracker.services.members import membership_remove
from tracker.services.repositories import repositories_fetch_due, repository_link
from tracker.trust import crypto

pytestmark = pytest.mark.django_db
API = "/api/v1/projects/BAL/repositories/"
GOOD: dict[str, Any] = {
    "name": "app",
    "url": "https://git.example.com/team/app.git",
    "credential": "tok-5ecret-abc",
}


@pytest.fixture(autouse=True)
def _nothing_fetched(monkeypatch, settings, tmp_path):
    configured(settings, tmp_path)
    monkeypatch.setattr(repositories, "fetch_kick", lambda: None)


def test_an_owner_links_a_repository_and_the_credential_is_never_shown(client_for, owner, viewer):
    created = client_for(owner).post(API, GOOD, format="json")

    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["has_credential"] is True
    assert "tok-5ecret-abc" not in created.content.decode()
    assert "credential" not in body
    assert "credential_encrypted" not in body
    repo = Repository.objects.get()
    assert crypto.decrypt(repo.credential_encrypted) == "tok-5ecret-abc"
    assert repo.default_branch == "main"
    assert repo.fetch_requested_at is not None
    listed = client_for(viewer).get(API)
    assert listed.status_code == 200
    assert [row["name"] for row in listed.json()["results"]] == ["app"]
    assert "tok-5ecret-abc" not in listed.content.decode()
    assert "tok-5ecret-abc" not in str(list(ActivityEvent.objects.values_list("data", flat=True)))


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"url": "http://git.example.com/a.git"}, "url", "https:// or ssh://"),
        ({"url": "git://git.example.com/a.git"}, "url", "https:// or ssh://"),
        ({"url": "file:///etc"}, "url", "https:// or ssh://"),
        ({"url": "ext::sh -c touch% /tmp/pwned"}, "url", "https:// or ssh://"),
        ({"url": "https://bob:hunter22@git.example.com/a.git"}, "url", "No credential in the URL"),
        ({"url": "ssh://-oProxyCommand=touch/a.git"}, "url", "needs a host"),
        ({"url": "https://git.example.com/a\x01.git"}, "url", "control characters"),
        ({"url": "https://git.example.com/a\x00.git"}, "url", "NUL"),
        ({"name": "Bad Name"}, "name", "Lowercase"),
        ({"name": ""}, "name", ""),
        ({"default_branch": "-x"}, "default_branch", "branch name"),
        ({"default_branch": "a..b"}, "default_branch", "branch name"),
        ({"credential": "tok\nen"}, "credential", "control characters"),
        ({"url": "ssh://git@git.example.com/a.git"}, "credential", "for an https URL"),
        ({"url": None, "local_path": "/etc"}, "local_path", "under one of"),
    ],
)
def test_bad_input_is_a_readable_400_and_nothing_is_stored(client_for, owner, body, field, words):
    given = {**GOOD, **body}
    if given.get("url") is None:
        given.pop("url")
        given.pop("credential")
    answer = client_for(owner).post(API, given, format="json")

    assert answer.status_code == 400, answer.json()
    fields = answer.json()["error"]["fields"]
    assert field in fields
    assert words.lower() in " ".join(fields[field]).lower()
    assert not Repository.objects.exists()


def test_a_url_and_a_path_together_or_neither_are_refused(client_for, owner, tmp_path):
    both = client_for(owner).post(API, {**GOOD, "local_path": str(tmp_path / "src")}, format="json")
    neither = client_for(owner).post(API, {"name": "app"}, format="json")

    assert (both.status_code, neither.status_code) == (400, 400)
    assert not Repository.objects.exists()


def test_a_local_path_is_refused_outside_the_roots_and_through_a_link_out(client_for, owner, tmp_path):
    outside = source_repo(tmp_path / "elsewhere")
    (tmp_path / "src" / "sneaky").symlink_to(outside)

    for path in (str(outside), str(tmp_path / "src" / "sneaky"), str(tmp_path / "src" / ".." / "elsewhere")):
        answer = client_for(owner).post(API, {"name": "app", "local_path": path}, format="json")
        assert answer.status_code == 400, path
        assert "under one of" in str(answer.json())
    assert not Repository.objects.exists()


def test_local_repositories_are_off_without_local_roots(client_for, owner, settings, tmp_path):
    configured(settings, tmp_path)
    settings.BALLET_REPOSITORIES = type(settings.BALLET_REPOSITORIES)()
    inside = source_repo(tmp_path / "src" / "app")

    answer = client_for(owner).post(API, {"name": "app", "local_path": str(inside)}, format="json")

    assert answer.status_code == 400
    assert "local_roots is empty" in str(answer.json())


def test_a_name_is_unique_in_the_project(client_for, owner):
    assert client_for(owner).post(API, GOOD, format="json").status_code == 201
    again = client_for(owner).post(API, GOOD, format="json")

    assert again.status_code == 400
    assert "name" in again.json()["error"]["fields"]
    assert Repository.objects.count() == 1


def test_an_owner_changes_the_branch_and_removes_the_credential(client_for, owner):
    repo = repository_link(actor=Actor(user=owner), project=owner.memberships.get().project, **GOOD)

    changed = client_for(owner).patch(f"{API}{repo.pk}/", {"default_branch": "develop"}, format="json")
    removed = client_for(owner).patch(f"{API}{repo.pk}/", {"credential": ""}, format="json")
    refused = client_for(owner).patch(f"{API}{repo.pk}/", {"url": "https://x.example/y"}, format="json")

    assert changed.json()["default_branch"] == "develop"
    assert removed.json()["has_credential"] is False
    assert refused.status_code == 400
    assert Repository.objects.get().credential_encrypted == ""


def test_unlinking_removes_the_mirror(client_for, owner, project, django_capture_on_commit_callbacks):
    repo = repository_link(actor=Actor(user=owner), project=project, **GOOD)
    mirror = mirror_path(repo)
    mirror.mkdir(parents=True)
    (mirror / "HEAD").write_text("ref: refs/heads/main\n")

    with django_capture_on_commit_callbacks(execute=True):
        answer = client_for(owner).delete(f"{API}{repo.pk}/")

    assert answer.status_code == 204
    assert not Repository.objects.exists()
    assert not mirror.exists()


def test_fetch_now_queues_a_fetch_that_the_worker_runs(client_for, owner, project, tmp_path):
    source = source_repo(tmp_path / "src" / "app")
    repo = repository_link(actor=Actor(user=owner), project=project, name="app", local_path=str(source))
    repositories_fetch_due()
    assert Repository.objects.get().fetch_requested_at is None

    answer = client_for(owner).post(f"{API}{repo.pk}/fetch/")

    assert answer.status_code == 202
    assert answer.json()["fetch_requested"] is True
    assert repositories_fetch_due() == 1
    status = client_for(owner).get(f"{API}{repo.pk}/").json()
    assert status["last_commit"]
    assert status["last_error"] == ""
    assert status["size_bytes"] > 0


@pytest.mark.parametrize(
    ("who", "status"), [("viewer", 403), ("member", 403), ("maintainer", 403), ("stranger", 404)]
)
def test_only_owners_write_and_strangers_see_nothing(client_for, users, owner, project, who, status):
    repo = repository_link(actor=Actor(user=owner), project=project, **GOOD)
    client = client_for(users[who])
    calls = [
        client.post(API, {**GOOD, "name": "mine"}, format="json"),
        client.patch(f"{API}{repo.pk}/", {"default_branch": "x"}, format="json"),
        client.delete(f"{API}{repo.pk}/"),
        client.post(f"{API}{repo.pk}/fetch/"),
    ]

    assert [call.status_code for call in calls] == [status] * len(calls)
    reads = [client.get(API).status_code, client.get(f"{API}{repo.pk}/").status_code]
    assert reads == ([404, 404] if who == "stranger" else [200, 200])
    assert Repository.objects.get().default_branch == "main"


def test_another_project_s_owner_finds_nothing(client_for, owner, project):
    repo = repository_link(actor=Actor(user=owner), project=project, **GOOD)
    elsewhere = make_user(username="elsewhere")
    make_membership(project=make_project(key="OTH"), user=elsewhere, role=Role.OWNER)
    client = client_for(elsewhere)

    assert client.get(f"{API}{repo.pk}/").status_code == 404
    assert client.delete(f"{API}{repo.pk}/").status_code == 404
    assert client.get(f"/api/v1/projects/OTH/repositories/{repo.pk}/").status_code == 404
    assert Repository.objects.count() == 1


def test_a_read_key_lists_and_no_key_links(owner, api_client, project):
    repo = repository_link(actor=Actor(user=owner), project=project, **GOOD)
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_key(owner, 'read')}")

    listed = api_client.get(API)
    linked: Any = api_client.post(API, {**GOOD, "name": "other"}, format="json")
    writes = [
        api_client.patch(f"{API}{repo.pk}/", {"default_branch": "x"}, format="json"),
        api_client.post(f"{API}{repo.pk}/fetch/"),
        api_client.delete(f"{API}{repo.pk}/"),
    ]

    assert (listed.status_code, linked.status_code) == (200, 403)
    assert [write.status_code for write in writes] == [403, 403, 403]
    assert list(Repository.objects.values_list("name", "default_branch")) == [("app", "main")]


@pytest.mark.parametrize("who", ["owner_of_a_sibling_project", "removed_owner"])
def test_a_sibling_project_s_owner_or_a_removed_owner_finds_nothing(client_for, users, owner, project, who):
    repo = repository_link(actor=Actor(user=owner), project=project, **GOOD)
    if who == "owner_of_a_sibling_project":
        user = users["stranger"]
        make_membership(
            project=make_project(organization=project.organization, key="SIB"), user=user, role=Role.OWNER
        )
    else:
        user = make_user(username="former")
        make_membership(project=project, user=user, role=Role.OWNER)
        assert client_for(user).get(f"{API}{repo.pk}/").status_code == 200
        membership_remove(actor=Actor(user=owner), project=project, username="former")
    client = client_for(user)

    calls = [
        client.get(API),
        client.get(f"{API}{repo.pk}/"),
        client.post(API, {**GOOD, "name": "mine"}, format="json"),
        client.patch(f"{API}{repo.pk}/", {"default_branch": "x"}, format="json"),
        client.post(f"{API}{repo.pk}/fetch/"),
        client.delete(f"{API}{repo.pk}/"),
    ]

    assert [call.status_code for call in calls] == [404] * len(calls)
    assert list(Repository.objects.values_list("name", "default_branch")) == [("app", "main")]
