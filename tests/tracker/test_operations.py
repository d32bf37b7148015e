"""Changeset operations are described once (tracker.operations): the planner tool's JSON Schema, the
OpenAPI component of GET /api/schema/ and the service's structural check accept the same operations,
keys and fields, and refuse the same malformed ones.

The OpenAPI side is checked as schemathesis reads it (its OpenAPI → JSON Schema conversion) and by
another engine (jsonschema_rs), so the dialect conversion is checked too.
"""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import pytest
from drf_spectacular.generators import SchemaGenerator
from jsonschema import Draft202012Validator
from schemathesis.specs.openapi.converter import to_json_schema

from planner.domain.tools import REPO_DEFINITIONS, TOOLS
from planner.domain.tools.base import _input_errors
from tracker.errors import ValidationError
from tracker.models import Changeset
from tracker.operations import FIELD_NAMES, OPERATION_KINDS, operations_errors
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose
from tracker.services.items import dependency_add

BAL = "/api/v1/projects/BAL/"
PROPOSE = TOOLS["propose_changeset"]

VALID = [
    {
        "op": "create",
        "ref": "login-2_b",
        "kind": "ticket",
        "fields": {
            "title": "Login form",
            "description": "# Markdown",
            "acceptance_criteria": ["Shows errors", "Remembers me"],
            "state": "ready",
            "epic": "BAL-2",
            "milestone": None,
            "policy": {"max_minutes": 30},
        },
    },
    {"op": "create", "kind": "epic", "fields": {"title": "Accounts", "milestone": "BAL-3", "state": "open"}},
    {"op": "update", "item": "BAL-1", "base_version": 1, "fields": {"title": "Renamed", "epic": None}},
    {"op": "add_dependency", "blocker": "$login-2_b", "blocked": "BAL-1"},
    {"op": "remove_dependency", "blocker": "BAL-4", "blocked": "BAL-1"},
]

INVALID = [
    ("not an object", "operations[0]"),
    ({"op": "delete", "item": "BAL-1"}, "operations[0].op"),
    ({"item": "BAL-1"}, "operations[0].op"),
    ({"op": "create", "kind": "story", "fields": {"title": "T"}}, "operations[0].kind"),
    ({"op": "create", "fields": {"title": "T"}}, "operations[0].kind"),
    ({"op": "create", "kind": "ticket", "fields": {"title": "  "}}, "operations[0].fields.title"),
    ({"op": "create", "kind": "ticket", "fields": {"title": "x" * 201}}, "operations[0].fields.title"),
    ({"op": "create", "kind": "ticket", "fields": {"description": "no title"}}, "operations[0].fields.title"),
    ({"op": "create", "kind": "ticket", "fields": "Login"}, "operations[0].fields"),
    ({"op": "create", "kind": "ticket", "ref": "a b", "fields": {"title": "T"}}, "operations[0].ref"),
    ({"op": "create", "kind": "ticket", "ref": "a\n", "fields": {"title": "T"}}, "operations[0].ref"),
    (
        {"op": "create", "kind": "ticket", "fields": {"title": "T", "colour": "red"}},
        "operations[0].fields.colour",
    ),
    (
        {"op": "create", "kind": "ticket", "fields": {"title": "T", "acceptance_criteria": ["ok", " "]}},
        "operations[0].fields.acceptance_criteria",
    ),
    (
        {"op": "create", "kind": "ticket", "fields": {"title": "T", "acceptance_criteria": ["c"] * 51}},
        "operations[0].fields.acceptance_criteria",
    ),
    ({"op": "create", "kind": "ticket", "fields": {"title": "T", "epic": 5}}, "operations[0].fields.epic"),
    (
        {"op": "create", "kind": "ticket", "fields": {"title": "T", "policy": "strict"}},
        "operations[0].fields.policy",
    ),
    (
        {"op": "update", "item": "BAL-1", "base_version": 0, "fields": {"title": "T"}},
        "operations[0].base_version",
    ),
    (
        {"op": "update", "item": "BAL-1", "base_version": True, "fields": {"title": "T"}},
        "operations[0].base_version",
    ),
    (
        {"op": "update", "item": "BAL-1", "base_version": "1", "fields": {"title": "T"}},
        "operations[0].base_version",
    ),
    ({"op": "update", "item": "BAL-1", "base_version": 1, "fields": {}}, "operations[0].fields"),
    (
        {"op": "update", "item": "BAL-1", "base_version": 1, "fields": {"state": "shipped"}},
        "operations[0].fields.state",
    ),
    (
        {"op": "update", "item": "BAL-1", "base_version": 1, "fields": {"kind": "epic"}},
        "operations[0].fields.kind",
    ),
    ({"op": "update", "base_version": 1, "fields": {"title": "T"}}, "operations[0].item"),
    ({"op": "update", "item": "BAL-1", "fields": {"title": "T"}}, "operations[0].base_version"),
    ({"op": "add_dependency", "blocker": "BAL-1"}, "operations[0].blocked"),
    ({"op": "add_dependency", "blocker": "BAL-1", "blocked": "BAL-3", "why": "x"}, "operations[0].why"),
    ({"op": "remove_dependency", "blocker": "", "blocked": "BAL-4"}, "operations[0].blocker"),
]


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    """The document GET /api/schema/ serves (test_api_schema checks the endpoint serves it)."""
    document: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return document


@pytest.fixture(scope="module")
def openapi_request(openapi) -> Any:
    """A validator of the propose request body as the OpenAPI document describes it."""
    schemas = {
        name: to_json_schema(schema, nullable_keyword="nullable", update_quantifiers=False)
        for name, schema in openapi["components"]["schemas"].items()
    }
    body = {"$ref": "#/components/schemas/ChangesetProposeRequest", "components": {"schemas": schemas}}
    return jsonschema_rs.Draft7Validator(body)


def _tool_operation_schema() -> dict[str, Any]:
    schema: dict[str, Any] = PROPOSE.input_schema["properties"]["operations"]["items"]
    return schema


def _openapi_choices(openapi) -> dict[str, dict[str, Any]]:
    """The operation components, by the op the discriminator maps to them."""
    schemas = openapi["components"]["schemas"]
    mapping = schemas["ChangesetOperation"]["discriminator"]["mapping"]
    return {op: schemas[ref.rsplit("/", 1)[1]] for op, ref in mapping.items()}


@pytest.fixture
def plan(project, owner, make_item):
    """BAL-1 a ticket, BAL-2 an epic, BAL-3 a milestone, BAL-4 a ticket blocking BAL-1."""
    ticket = make_item(title="Login")
    make_item(kind="epic", title="Accounts")
    make_item(kind="milestone", title="Beta")
    blocker = make_item(title="Sessions")
    dependency_add(actor=Actor(user=owner), blocker=blocker, blocked=ticket)


def test_every_valid_operation_is_accepted_by_all_three_descriptions(
    project, maintainer, plan, client_for, openapi_request
):
    body = {"title": "Every operation", "operations": VALID}

    assert _input_errors(PROPOSE, body) is None
    assert openapi_request.is_valid(body)
    assert operations_errors(VALID) == {}
    response = client_for(maintainer).post(f"{BAL}changesets/", body, format="json")
    assert response.status_code == 201, response.content


@pytest.mark.parametrize(("operation", "where"), INVALID)
def test_a_malformed_operation_is_refused_by_all_three_descriptions_at_its_path(
    project, member, plan, client_for, openapi_request, operation, where
):
    body = {"title": "Malformed", "operations": [operation]}

    tool_problem = _input_errors(PROPOSE, body)
    response = client_for(member).post(f"{BAL}changesets/", body, format="json")

    assert set(operations_errors([operation])) == {where}
    assert tool_problem is not None
    tool_where = tool_problem.split(": ", 1)[0]
    # The same place, or the object a missing key belongs in, or the element of the list that fails.
    assert _nested(where, tool_where) or _nested(tool_where, where), tool_problem
    assert not openapi_request.is_valid(body)
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == {where}
    assert not Changeset.objects.exists()


def test_the_service_refuses_what_the_check_refuses_with_the_same_messages(project, member, plan):
    operations = [operation for operation, _ in INVALID]
    expected = operations_errors(operations)

    with pytest.raises(ValidationError) as refused:
        changeset_propose(actor=Actor(user=member), project=project, title="T", operations=operations)

    assert refused.value.errors == expected  # the plan adds nothing where the structure failed


def _nested(path: str, within: str) -> bool:
    return path == within or path.startswith((f"{within}.", f"{within}["))


def _accepted_ops() -> set[str]:
    candidates = [*OPERATION_KINDS, "delete", "move", "Create", "create_item"]
    return {op for op in candidates if "operations[0].op" not in operations_errors([{"op": op}])}


def _accepted_keys(op: str, candidates: set[str]) -> set[str]:
    def unknown(key: str) -> bool:
        messages = operations_errors([{"op": op, key: "x"}]).get(f"operations[0].{key}", [])
        return any(message.startswith("Unknown key") for message in messages)

    return {key for key in candidates if not unknown(key)}


def _accepted_fields(candidates: set[str]) -> set[str]:
    def unknown(name: str) -> bool:
        operation = {"op": "update", "item": "BAL-1", "base_version": 1, "fields": {name: "x"}}
        messages = operations_errors([operation]).get(f"operations[0].fields.{name}", [])
        return any(message.startswith("Unknown field") for message in messages)

    return {name for name in candidates if not unknown(name)}


def test_the_operations_keys_and_fields_the_check_accepts_are_those_both_schemas_name(openapi):
    tool_choices = {
        choice["properties"]["op"]["enum"][0]: choice for choice in _tool_operation_schema()["anyOf"]
    }
    openapi_choices = _openapi_choices(openapi)
    ops = _accepted_ops()
    assert ops == set(tool_choices) == set(openapi_choices) == set(OPERATION_KINDS)

    every_key = {key for choice in tool_choices.values() for key in choice["properties"]} | {
        "why",
        "id",
        "version",
    }
    for op in ops:
        keys = _accepted_keys(op, every_key) | {"op"}
        assert keys == set(tool_choices[op]["properties"]) == set(openapi_choices[op]["properties"]), op

    fields = _accepted_fields({*FIELD_NAMES, "kind", "colour", "version", "number", "key"})
    assert fields == set(FIELD_NAMES)
    for op in ("create", "update"):
        assert set(tool_choices[op]["properties"]["fields"]["properties"]) == fields
        assert set(openapi_choices[op]["properties"]["fields"]["properties"]) == fields


def test_the_changeset_answers_and_requests_use_the_component(openapi):
    schemas = openapi["components"]["schemas"]

    for component in ("ChangesetProposeRequest", "Changeset"):
        operations = schemas[component]["properties"]["operations"]
        assert operations["items"] == {"$ref": "#/components/schemas/ChangesetOperation"}
        assert (operations["minItems"], operations["maxItems"]) == (1, 200)
    epic = schemas["ChangesetCreateOperation"]["properties"]["fields"]["properties"]["epic"]
    assert (epic["type"], epic["nullable"]) == ("string", True)  # OpenAPI 3.0 has no null type


def test_the_served_document_carries_the_component(client, openapi):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    served = response.json()["components"]["schemas"]
    assert served["ChangesetOperation"] == openapi["components"]["schemas"]["ChangesetOperation"]
    assert set(served) >= {f"Changeset{op.title().replace('_', '')}Operation" for op in OPERATION_KINDS}


def _walk(node: Any):
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        yield from _walk(child)


def test_the_tool_schemas_are_self_contained_json_schema_objects():
    for definition in REPO_DEFINITIONS:  # every tool a session may be shown
        Draft202012Validator.check_schema(definition.input_schema)
        assert definition.input_schema["type"] == "object"
        keys = {key for node in _walk(definition.input_schema) if isinstance(node, dict) for key in node}
        assert not keys & {"$ref", "$defs", "definitions", "nullable", "discriminator"}, definition.name
