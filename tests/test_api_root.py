"""``/api/v1/``: the API's root links the schema, its doc pages and the top-level lists, to anyone."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tracker.models import Scope
from tracker.services.keys import key_create, key_revoke

LINKS = {
    "schema": "http://testserver/api/schema/",
    "docs": "http://testserver/api/schema/docs/",
    "redoc": "http://testserver/api/schema/redoc/",
    "projects": "http://testserver/api/v1/projects/",
    "knowledge": "http://testserver/api/v1/knowledge/",
    "planner_sessions": "http://testserver/api/v1/planner/sessions/",
    "keys": "http://testserver/api/v1/keys/",
}


@pytest.mark.django_db
def test_the_root_links_the_schema_the_doc_pages_and_the_lists_to_an_anonymous_caller():
    response = APIClient().get("/api/v1/")

    assert response.status_code == 200
    assert response.json() == LINKS


def test_every_link_of_the_root_answers_a_signed_in_owner(project, owner):
    client = APIClient()
    client.force_login(owner)

    links = client.get("/api/v1/").json()

    assert links == LINKS
    for name, url in links.items():
        assert client.get(url).status_code == 200, name


def test_a_key_of_any_scope_reads_the_root_but_a_revoked_one_is_refused(member):
    key, secret = key_create(user=member, name="worker", scopes=[Scope.WORK])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/api/v1/").json() == LINKS

    key_revoke(key=key)

    assert client.get("/api/v1/").status_code == 401


def test_the_root_is_in_the_schema_open_to_anyone(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    root = schema["paths"]["/api/v1/"]["get"]
    assert set(root["responses"]) == {"200", "401"}
    assert "security" not in root  # no credential needed: the doc pages show no lock
    assert set(schema["components"]["schemas"]["ApiRoot"]["properties"]) == set(LINKS)


def test_the_browsable_root_renders_for_a_signed_in_user(client, viewer):
    client.force_login(viewer)

    response = client.get("/api/v1/", HTTP_ACCEPT="text/html")

    assert response.status_code == 200
    assert "http://testserver/api/v1/projects/" in response.content.decode()
