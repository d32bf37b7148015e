"""The schema's operations in groups by what they are about (ballet/api_docs.py), the product named
Ballet, and the open root shown as open."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from ballet.api_docs import TAGS, tag_by_path, tag_of

METHODS = {"get", "post", "put", "patch", "delete"}
NAMES = [name for name, _, _ in TAGS]


@pytest.fixture(scope="module")
def schema(django_db_blocker: Any) -> dict[str, Any]:
    from django.test import Client  # noqa: PLC0415

    with django_db_blocker.unblock():
        response = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    found: dict[str, Any] = response.json()
    return found


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
        if method in METHODS
    ]


def test_every_operation_is_in_exactly_one_of_the_groups(schema):
    found = operations(schema)
    assert len(found) > 80
    untagged = [
        (m, p, o.get("tags")) for p, m, o in found if len(o.get("tags", [])) != 1 or o["tags"][0] not in NAMES
    ]
    assert untagged == []
    assert "v1" not in {tag for _, _, o in found for tag in o["tags"]}


def test_no_group_is_empty_and_they_come_described_in_order(schema):
    used = Counter(o["tags"][0] for _, _, o in operations(schema))
    assert set(used) == set(NAMES), set(NAMES) - set(used)
    assert [t["name"] for t in schema["tags"]] == NAMES
    assert all(t["description"] for t in schema["tags"])


def test_no_path_is_claimed_by_two_groups(schema):
    for path in schema["paths"]:
        rest = path.removeprefix("/api/v1")
        claiming = [name for name, _, pattern in TAGS if re.search(pattern, rest)]
        assert len(claiming) == 1, (path, claiming)


@pytest.mark.parametrize(
    ("path", "tag"),
    [
        ("/api/v1/", "root"),
        ("/api/v1/projects/", "projects"),
        ("/api/v1/projects/{key}/", "projects"),
        ("/api/v1/projects/{key}/items/{item_key}/", "plan"),
        ("/api/v1/projects/{key}/items/{item_key}/claim/", "claims"),
        ("/api/v1/projects/{key}/claims/{claim_id}/reports/", "claims"),
        ("/api/v1/projects/{key}/changesets/{number}/impact/", "changesets"),
        ("/api/v1/projects/{key}/questions/{question}/answer/", "questions"),
        ("/api/v1/planner/sessions/{session}/messages/", "planner"),
        ("/api/v1/projects/{key}/usage/", "planner"),
        ("/api/v1/keys/{key_id}/", "keys"),
        ("/api/v1/projects/{key}/keys/", "keys"),
        ("/api/v1/projects/{key}/events/stream/", "events"),
        ("/api/v1/projects/{key}/webhooks/{webhook_id}/ping/", "webhooks"),
        ("/api/v1/knowledge/{entry_id}/", "knowledge"),
        ("/api/v1/projects/{key}/repositories/{repository_id}/fetch/", "repositories"),
        ("/api/v1/invitations/{invitation_id}/accept/", "members"),
        ("/api/v1/projects/{key}/nothing-yet/", None),
        ("/api/v2/projects/", None),
    ],
)
def test_a_path_names_its_group(path, tag):
    assert tag_of(path) == tag


def test_an_operation_no_group_claims_keeps_its_tag_and_fails_the_first_test():
    result = {
        "paths": {"/api/v1/new-thing/": {"get": {"tags": ["v1"]}}, "/api/v1/": {"get": {"tags": ["v1"]}}}
    }
    tagged = tag_by_path(result, None, None, True)
    assert tagged["paths"]["/api/v1/new-thing/"]["get"]["tags"] == ["v1"]
    assert tagged["paths"]["/api/v1/"]["get"]["tags"] == ["root"]


def test_the_schema_names_the_product_ballet(schema):
    assert schema["info"]["title"] == "Ballet API"
    assert "Ballet Core" not in str(schema["info"])


def test_the_root_is_open_and_the_rest_takes_a_credential(schema):
    root = schema["paths"]["/api/v1/"]["get"]
    assert root.get("security", []) == []
    assert "security" not in schema  # no requirement for every operation that the root would inherit
    needing = [(p, m) for p, m, o in operations(schema) if p != "/api/v1/" and not o.get("security")]
    assert needing == []
