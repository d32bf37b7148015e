"""Keys bound to projects act only there: every other project answers as if it did not exist
(REST, the planner's REST sessions; MCP in tests/planner/mcp/test_key_binding.py). The binding is
read once, centrally, by the one permission check (tracker.trust.permissions.key_bind)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.factories import make_membership, make_project
from tracker.models import ApiKey, Role
from tracker.services.keys import key_create
from tracker.trust.permissions import TRACKER_READ, has_permission, key_bind, visible_projects

pytestmark = pytest.mark.django_db


def bearer(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def session(user: Any) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


@pytest.fixture
def both(member, project, other_project):
    """``member`` belongs to BAL and OTH."""
    make_membership(project=other_project, user=member, role=Role.MEMBER)
    return member


def test_a_bound_key_finds_only_its_projects(both, project, other_project):
    _, bound = key_create(user=both, name="BAL only", scopes=["read", "plan"], projects=[project])
    _, unbound = key_create(user=both, name="anywhere", scopes=["read"])

    assert [row["key"] for row in bearer(bound).get("/api/v1/projects/").json()["results"]] == ["BAL"]
    assert bearer(bound).get("/api/v1/projects/BAL/items/").status_code == 200
    refused = bearer(bound).get("/api/v1/projects/OTH/items/")
    assert refused.status_code == 404
    assert refused.json()["error"]["message"] == "Project OTH not found."
    assert bearer(bound).get("/api/v1/projects/OTH/").status_code == 404
    assert (
        bearer(bound).get("/api/v1/projects/NOPE/").json()
        == bearer(bound).get("/api/v1/projects/NOPE/").json()
    )
    assert sorted(row["key"] for row in bearer(unbound).get("/api/v1/projects/").json()["results"]) == [
        "BAL",
        "OTH",
    ]


def test_a_bound_key_of_a_superuser_acts_only_in_its_project(superuser, project, other_project):
    _, bound = key_create(user=superuser, name="root bot", scopes=["read"], projects=[project])

    assert [row["key"] for row in bearer(bound).get("/api/v1/projects/").json()["results"]] == ["BAL"]
    assert bearer(bound).get("/api/v1/projects/OTH/").status_code == 404


@pytest.mark.django_db(transaction=True)  # the planner's async endpoints read on its database threads
def test_a_bound_key_opens_no_planner_session_in_another_project(both, project, other_project):
    _, bound = key_create(user=both, name="BAL only", scopes=["plan"], projects=[project])

    refused = bearer(bound).post("/api/v1/planner/sessions/", {"project": "OTH"}, format="json")

    assert refused.status_code == 404, refused.content


def test_the_check_honours_the_binding_of_the_user_object_only(both, project, other_project):
    bound = key_bind(type(both).objects.get(pk=both.pk), [project.pk])

    assert has_permission(bound, project, TRACKER_READ)
    assert not has_permission(bound, other_project, TRACKER_READ)
    assert list(visible_projects(bound)) == [project]
    assert has_permission(both, other_project, TRACKER_READ)  # another object of the same user: unbound


def test_keys_are_bound_over_rest_to_projects_one_may_read(both, project, other_project):
    made = session(both).post(
        "/api/v1/keys/", {"name": "bot", "scopes": ["read"], "projects": ["BAL", "BAL"]}, format="json"
    )

    assert made.status_code == 201, made.content
    assert made.json()["projects"] == ["BAL"]
    assert list(ApiKey.objects.get(pk=made.json()["id"]).projects.all()) == [project]
    assert session(both).get("/api/v1/keys/").json()["results"][0]["projects"] == ["BAL"]


@pytest.mark.parametrize(
    ("projects", "field"),
    [
        (["NOPE"], "projects"),
        (["SECRET"], "projects"),  # exists, but not readable by the caller
        ("BAL", "projects"),
        ([3], "projects.0"),
        (["B" * 11], "projects.0"),
        (["BAL\x00"], "projects[0]"),
        ([f"P{n}" for n in range(51)], "projects"),
    ],
)
def test_binding_to_a_project_one_cannot_read_is_refused(member, project, projects, field):
    make_project(key="SECRET")
    made = session(member).post(
        "/api/v1/keys/", {"name": "bot", "scopes": ["read"], "projects": projects}, format="json"
    )

    assert made.status_code == 400, made.content
    assert field in made.json()["error"]["fields"]
    assert not ApiKey.objects.exists()


def test_the_keys_page_binds_a_new_key(both, project):
    client = Client()
    client.force_login(both)
    once = re.search(r'name="once" value="([^"]+)"', client.get("/keys/").content.decode())
    assert once

    made = client.post(
        "/keys/", {"name": "bot", "scopes": ["read"], "projects": ["BAL"], "once": once.group(1)}
    )

    assert made.status_code == 200
    assert list(ApiKey.objects.get(name="bot").projects.all()) == [project]


def test_the_keys_page_carries_the_csp_and_no_store_on_every_answer(member):
    client = Client()
    client.force_login(member)

    got = client.get("/keys/")
    posted = client.post("/keys/", {"name": "bot", "scopes": ["read"], "once": "stale"})

    for answer in (got, posted):
        assert answer["Cache-Control"] == "no-store"
    assert "default-src 'none'" in got["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in got["Content-Security-Policy"]
