"""Bad input on every tracker write endpoint answers 400 with field errors, never 500."""

from __future__ import annotations

import pytest

from tracker.models import Changeset, Item, Membership, Project, SkillPin, SkillVersion
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose
from tracker.services.skills import skill_version_create

BAL = "/api/v1/projects/BAL/"

# Every write endpoint of the tracker, with a method and a body it accepts.
WRITES = [
    ("patch", BAL, {"name": "Renamed"}),
    ("post", BAL + "members/", {"username": "stranger", "role": "viewer"}),
    (
        "post",
        BAL + "changesets/",
        {"title": "T", "operations": [{"op": "create", "kind": "epic", "fields": {"title": "E"}}]},
    ),
    ("post", BAL + "changesets/1/apply/", {}),
    ("post", BAL + "changesets/1/reject/", {"note": "No."}),
    ("post", BAL + "skills/", {"name": "review", "body": "# Review"}),
    ("patch", BAL + "skills/planner/", {"pin": 1}),
]
WRITE_IDS = [f"{method} {url}" for method, url, _ in WRITES]

# (method, url, body, the field path the error names)
FIELD_ERRORS = [
    # wrong types
    ("patch", BAL, {"name": 5}, "name"),
    ("patch", BAL, {"description": ["x"]}, "description"),
    ("patch", BAL, {"settings": "four_eyes"}, "settings"),
    ("patch", BAL, {"settings": {"max_rounds": "many"}}, "settings.max_rounds"),
    ("patch", BAL, {"settings": {"max_rounds": 0}}, "settings.max_rounds"),
    ("patch", BAL, {"settings": {"colour": "blue"}}, "settings.colour"),
    ("patch", BAL, {"settings": {"model": "claude\u0000"}}, "settings"),
    ("patch", BAL, {"credential": 12345}, "credential"),
    ("patch", BAL, {"name": None}, "name"),
    ("post", BAL + "members/", {"username": 7, "role": "viewer"}, "username"),
    ("post", BAL + "members/", {"username": "stranger", "role": "king"}, "role"),
    ("post", BAL + "members/", {"username": "nobody", "role": "viewer"}, "username"),
    ("post", BAL + "members/", {"role": "viewer"}, "username"),
    ("post", BAL + "changesets/", {"title": 5, "operations": []}, "title"),
    ("post", BAL + "changesets/", {"title": "T", "rationale": {"why": 1}, "operations": []}, "rationale"),
    ("post", BAL + "changesets/", {"title": "T", "operations": "create it"}, "operations"),
    ("post", BAL + "changesets/", {"title": "T"}, "operations"),
    ("post", BAL + "changesets/", {"title": "T", "operations": [{"op": "explode"}]}, "operations[0].op"),
    ("post", BAL + "changesets/", {"title": "T", "operations": ["create"]}, "operations[0]"),
    (
        "post",
        BAL + "changesets/",
        {
            "title": "T",
            "operations": [{"op": "update", "item": "BAL-1", "base_version": 1, "fields": {"state": "nope"}}],
        },
        "operations[0].fields.state",
    ),
    (
        "post",
        BAL + "changesets/",
        {
            "title": "T",
            "operations": [{"op": "update", "item": "BAL-1", "base_version": "1", "fields": {"title": "x"}}],
        },
        "operations[0].base_version",
    ),
    (
        "post",
        BAL + "changesets/",
        {
            "title": "T",
            "operations": [{"op": "create", "kind": "ticket", "fields": {"title": "x", "colour": 1}}],
        },
        "operations[0].fields.colour",
    ),
    (
        "post",
        BAL + "changesets/",
        {
            "title": "T",
            "operations": [
                {"op": "add_dependency", "blocker": "BAL-99999999999999999999", "blocked": "BAL-1"}
            ],
        },
        "operations[0].blocker",
    ),
    (
        "post",
        BAL + "changesets/",
        {"title": "T", "operations": [{"op": "create", "kind": "ticket", "fields": {"title": "a\u0000b"}}]},
        "operations",
    ),
    ("post", BAL + "changesets/1/reject/", {"note": 5}, "note"),
    ("post", BAL + "skills/", {"name": "Not A Slug", "body": "# x"}, "name"),
    ("post", BAL + "skills/", {"name": "review", "body": 5}, "body"),
    ("post", BAL + "skills/", {"name": "review", "body": "   "}, "body"),
    ("post", BAL + "skills/", {"name": "review", "body": "# x", "scope": "galaxy"}, "scope"),
    ("patch", BAL + "skills/planner/", {"pin": "1"}, "pin"),
    ("patch", BAL + "skills/planner/", {"pin": True}, "pin"),
    ("patch", BAL + "skills/planner/", {"pin": 1.5}, "pin"),
    ("patch", BAL + "skills/planner/", {"pin": 99}, "pin"),
    ("patch", BAL + "skills/planner/", {"pin": 0}, "pin"),
    ("patch", BAL + "skills/planner/", {"pin": 10**30}, "pin"),
    ("patch", BAL + "skills/planner/", {}, "pin"),
    # overlong strings
    ("patch", BAL, {"name": "n" * 201}, "name"),
    ("patch", BAL, {"description": "d" * 20_001}, "description"),
    ("patch", BAL, {"credential": "k" * 501}, "credential"),
    ("post", BAL + "members/", {"username": "u" * 151, "role": "viewer"}, "username"),
    ("post", BAL + "changesets/", {"title": "t" * 201, "operations": []}, "title"),
    ("post", BAL + "changesets/", {"title": "T", "rationale": "r" * 10_001, "operations": []}, "rationale"),
    (
        "post",
        BAL + "changesets/",
        {"title": "T", "operations": [{"op": "create", "kind": "ticket", "fields": {"title": "t" * 201}}]},
        "operations[0].fields.title",
    ),
    ("post", BAL + "changesets/1/reject/", {"note": "n" * 5001}, "note"),
    ("post", BAL + "skills/", {"name": "s" * 101, "body": "# x"}, "name"),
    ("post", BAL + "skills/", {"name": "review", "body": "b" * 100_001}, "body"),
]


@pytest.fixture
def setup(project, users, make_item):
    make_item(title="Ticket")
    changeset_propose(
        actor=Actor(user=users["member"]),
        project=project,
        title="Add an epic",
        operations=[{"op": "create", "kind": "epic", "fields": {"title": "E"}}],
    )
    skill_version_create(actor=Actor(user=users["owner"]), project=project, name="planner", body="# Plan")
    return users


def _state() -> tuple:
    """Everything a write endpoint could change."""
    project = Project.objects.get(key="BAL")
    return (
        project.name,
        project.description,
        project.settings,
        project.credential_encrypted,
        sorted(Membership.objects.values_list("user__username", "role")),
        list(Changeset.objects.values_list("number", "status")),
        Item.objects.count(),
        SkillVersion.objects.count(),
        SkillPin.objects.count(),
    )


@pytest.mark.parametrize("case", FIELD_ERRORS)
def test_bad_input_names_the_field(setup, client_for, case):
    method, url, body, field = case
    before = _state()

    response = getattr(client_for(setup["owner"]), method)(url, body, format="json")

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert field in error["fields"], error
    assert all(isinstance(m, str) and m for m in error["fields"][field])
    assert _state() == before


@pytest.mark.parametrize(("method", "url", "body"), WRITES, ids=WRITE_IDS)
def test_unknown_field_is_refused(setup, client_for, method, url, body):
    before = _state()

    response = getattr(client_for(setup["owner"]), method)(url, {**body, "colour": "blue"}, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["fields"]["colour"] == ["Unknown field."]
    assert _state() == before


@pytest.mark.parametrize("write", WRITES, ids=WRITE_IDS)
@pytest.mark.parametrize("raw", ['{"title": "T",', "not json", '{"a": NaN'])
def test_malformed_json_is_400(setup, client_for, write, raw):
    method, url, _ = write
    response = client_for(setup["owner"]).generic(method.upper(), url, raw, content_type="application/json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "parse_error"
    assert "JSON" in error["message"]


@pytest.mark.parametrize("write", WRITES, ids=WRITE_IDS)
@pytest.mark.parametrize("raw", ["[1, 2]", '"text"', "42", "null"])
def test_body_that_is_not_an_object_is_400(setup, client_for, write, raw):
    method, url, _ = write
    before = _state()

    response = client_for(setup["owner"]).generic(method.upper(), url, raw, content_type="application/json")

    assert response.status_code == 400
    assert "non_field_errors" in response.json()["error"]["fields"]
    assert _state() == before


@pytest.mark.parametrize(("method", "url", "body"), WRITES, ids=WRITE_IDS)
def test_unsupported_media_type_is_415(setup, client_for, method, url, body):
    response = client_for(setup["owner"]).generic(method.upper(), url, "<x/>", content_type="application/xml")

    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


@pytest.mark.parametrize(
    "url",
    [
        BAL + "items/?kind=saga",
        BAL + "items/?state=sleeping",
        BAL + "items/?epic=BAL-1",
        BAL + "items/?milestone=BAL-404",
        BAL + "changesets/?status=pending",
    ],
)
def test_bad_filters_are_field_errors(setup, client_for, url):
    response = client_for(setup["owner"]).get(url)

    assert response.status_code == 400
    field = url.split("?")[1].split("=")[0]
    assert field in response.json()["error"]["fields"]


@pytest.mark.parametrize(
    "url",
    [
        BAL + "items/BAL-99999999999999999999999/",
        BAL + "items/BAL-x/",
        BAL + "items/bal-1/",
        BAL + "changesets/99999999999999999999999/",
        BAL + "changesets/99999999999999999999999/apply/",
    ],
)
def test_out_of_range_keys_are_not_found(setup, client_for, url):
    client = client_for(setup["owner"])

    response = client.post(url) if url.endswith("apply/") else client.get(url)

    assert response.status_code == 404


@pytest.mark.parametrize("depth", [65, 5000])
def test_deeply_nested_json_is_400(setup, client_for, depth):
    raw = '{"title": "T", "operations": ' + "[" * depth + "]" * depth + "}"

    response = client_for(setup["owner"]).generic(
        "POST", BAL + "changesets/", raw, content_type="application/json"
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"
    assert not Changeset.objects.filter(number=2).exists()


def test_form_encoded_bodies_are_refused(setup, client_for):
    response = client_for(setup["owner"]).post(BAL + "changesets/1/reject/", {"note": "No."})

    assert response.status_code == 415
    assert Changeset.objects.get(number=1).status == "proposed"
