"""The inbox over REST: ``GET /api/v1/inbox/`` and ``POST /api/v1/inbox/{id}/dismiss/``."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.factories import make_key
from tracker.models import Dismissal, Notice
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose

pytestmark = pytest.mark.django_db

URL = "/api/v1/inbox/"


@pytest.fixture
def proposed(project, member):
    return changeset_propose(
        actor=Actor(user=member),
        project=project,
        title="Add an <epic>",
        operations=[{"op": "create", "kind": "epic", "fields": {"title": "E"}}],
    )


def with_key(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def test_the_list_names_each_entry(client_for, owner, proposed):
    response = client_for(owner).get(URL)
    assert response.status_code == 200
    assert response["Cache-Control"] == "private, no-store"
    body = response.json()
    assert body["count"] == 1
    [entry] = body["results"]
    assert set(entry) == {"id", "kind", "project", "title", "url", "created_at"}
    assert entry["id"] == f"changeset-BAL-{proposed.number}"
    assert (entry["kind"], entry["project"]) == ("changeset", "BAL")
    assert entry["title"] == f"#{proposed.number} Add an <epic>"
    assert entry["url"] == f"/projects/BAL/changesets/{proposed.number}/"


def test_count_only_answers_the_count(client_for, owner, proposed, project):
    Notice.objects.create(user=owner, project=project, kind="mention", title="m")
    assert client_for(owner).get(URL, {"count_only": "1"}).json() == {"count": 2, "results": []}
    assert client_for(owner).get(URL, {"count_only": "maybe"}).status_code == 400


def test_nothing_waits_for_a_viewer_or_a_stranger(client_for, users, proposed):
    for name in ("viewer", "stranger", "member"):
        assert client_for(users[name]).get(URL).json() == {"count": 0, "results": []}, name


def test_dismissing_answers_204_twice_and_hides_the_entry(client_for, owner, proposed):
    client = client_for(owner)
    entry = f"changeset-BAL-{proposed.number}"
    assert client.post(f"{URL}{entry}/dismiss/").status_code == 204
    assert client.post(f"{URL}{entry}/dismiss/").status_code == 204
    assert client.get(URL).json() == {"count": 0, "results": []}
    assert Dismissal.objects.filter(user=owner, entry=entry).count() == 1


@pytest.mark.parametrize("entry", ["notice-424242", "changeset-BAL-99", "whatever", "notice-1%00"])
def test_dismissing_an_unknown_entry_is_404(client_for, owner, entry):
    response = client_for(owner).post(f"{URL}{entry}/dismiss/")
    assert response.status_code == 404
    assert not Dismissal.objects.exists()


def test_dismissing_another_users_entry_is_404(client_for, users, project, proposed):
    notice = Notice.objects.create(user=users["owner"], project=project, kind="mention", title="m")
    client = client_for(users["member"])
    assert client.post(f"{URL}notice-{notice.pk}/dismiss/").status_code == 404
    assert client.post(f"{URL}changeset-BAL-{proposed.number}/dismiss/").status_code == 404
    assert not Dismissal.objects.exists()


def test_anonymous_callers_are_refused(api_client):
    assert api_client.get(URL).status_code == 401
    assert api_client.post(f"{URL}notice-1/dismiss/").status_code == 401


def test_a_key_with_the_read_scope_reads_and_dismisses(owner, proposed):
    client = with_key(make_key(owner, "read"))
    assert client.get(URL).json()["count"] == 1
    assert client.post(f"{URL}changeset-BAL-{proposed.number}/dismiss/").status_code == 204


def test_a_key_without_the_read_scope_is_refused(owner, proposed):
    client = with_key(make_key(owner, "work"))
    assert client.get(URL).status_code == 403
    assert client.post(f"{URL}changeset-BAL-{proposed.number}/dismiss/").status_code == 403
