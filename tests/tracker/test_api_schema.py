"""The OpenAPI document and its doc pages."""

from __future__ import annotations

import pytest
from django.core.management import call_command

PATHS = [
    "/api/v1/projects/",
    "/api/v1/projects/{key}/",
    "/api/v1/projects/{key}/members/",
    "/api/v1/projects/{key}/members/{username}/",
    "/api/v1/projects/{key}/items/",
    "/api/v1/projects/{key}/items/{item_key}/",
    "/api/v1/projects/{key}/runnable/",
    "/api/v1/projects/{key}/items/{item_key}/claim/",
    "/api/v1/projects/{key}/items/{item_key}/comments/",
    "/api/v1/projects/{key}/items/{item_key}/watch/",
    "/api/v1/projects/{key}/claims/",
    "/api/v1/projects/{key}/claims/{claim_id}/",
    "/api/v1/projects/{key}/claims/{claim_id}/reports/",
    "/api/v1/projects/{key}/claims/{claim_id}/release/",
    "/api/v1/projects/{key}/changesets/",
    "/api/v1/projects/{key}/changesets/{number}/",
    "/api/v1/projects/{key}/changesets/{number}/apply/",
    "/api/v1/projects/{key}/changesets/{number}/reject/",
    "/api/v1/projects/{key}/skills/",
    "/api/v1/projects/{key}/skills/{name}/",
    "/api/v1/knowledge/",
    "/api/v1/knowledge/{entry_id}/",
]


@pytest.fixture
def schema(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def test_schema_has_every_path(schema):
    assert set(PATHS) <= set(schema["paths"])


def test_schema_documents_methods_and_errors(schema):
    changesets = schema["paths"]["/api/v1/projects/{key}/changesets/"]
    assert set(changesets) >= {"get", "post"}
    assert {"200", "400", "401", "404"} <= set(changesets["get"]["responses"])
    assert {"201", "400", "401", "403", "404"} <= set(changesets["post"]["responses"])
    knowledge = schema["paths"]["/api/v1/knowledge/{entry_id}/"]
    assert "409" in knowledge["patch"]["responses"]
    assert schema["paths"]["/api/v1/projects/{key}/changesets/{number}/"]["get"]["parameters"][1][
        "schema"
    ] == {"type": "integer"}


def test_list_answers_are_paginated(schema):
    ref = schema["paths"]["/api/v1/projects/{key}/items/"]["get"]["responses"]["200"]["content"]
    name = ref["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(schema["components"]["schemas"][name]["properties"]) == {
        "count",
        "limit",
        "offset",
        "next",
        "previous",
        "results",
    }
    parameters = schema["paths"]["/api/v1/projects/{key}/items/"]["get"]["parameters"]
    assert {"limit", "offset"} <= {parameter["name"] for parameter in parameters}


def test_credential_is_write_only_in_the_schema(schema):
    components = schema["components"]["schemas"]
    assert "credential" not in components["Project"]["properties"]
    assert "has_credential" in components["Project"]["properties"]
    assert "credential" in components["PatchedProjectUpdateRequest"]["properties"]


def test_schema_generates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))


@pytest.mark.parametrize("url", ["/api/schema/docs/", "/api/schema/redoc/"])
def test_doc_pages_render(client, url):
    response = client.get(url)

    assert response.status_code == 200
    assert "/api/schema/" in response.content.decode()


def test_browsable_api_renders_for_a_logged_in_user(client, project, viewer):
    client.force_login(viewer)

    response = client.get("/api/v1/projects/BAL/", HTTP_ACCEPT="text/html")

    assert response.status_code == 200
    assert "Ballet" in response.content.decode()
