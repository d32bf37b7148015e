"""Bad input on every tracker write endpoint answers 400 with field errors, never 500."""

from __future__ import annotations

import pytest
from django.db import InterfaceError, OperationalError

from tracker.models import Changeset, Item, Membership, Project, SkillPin, SkillVersion
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose
from tracker.services.skills import skill_version_create
from tracker.web.apis import items as items_api

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
    ("patch", BAL, {"settings": {"model": "claude\u0000"}}, "settings.model"),
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
        "operations[0].fields.title",
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


@pytest.mark.parametrize(
    "url",
    [
        BAL + "items/BAL-²/",
        BAL + "items/BAL-\u0663/",  # Arabic-Indic three: int() reads it as 3
        BAL + "items/BAL-\uff11/",  # fullwidth one
        BAL + "items/BAL-2147483648/",
        BAL + "items/BAL-0/",
        BAL + "items/BAL-1%0A/",
    ],
)
def test_item_keys_take_only_ascii_digits_in_range(setup, client_for, make_item, url):
    make_item(title="Two")
    make_item(title="Three")

    response = client_for(setup["owner"]).get(url)

    assert response.status_code == 404, response.content
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("field", ["epic", "milestone"])
def test_a_non_ascii_parent_filter_is_a_field_error(setup, client_for, field):
    response = client_for(setup["owner"]).get(BAL + f"items/?{field}=BAL-²")

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_a_changeset_naming_a_non_ascii_key_is_a_field_error(setup, client_for):
    operations = [{"op": "add_dependency", "blocker": "BAL-²", "blocked": "BAL-1"}]

    response = client_for(setup["owner"]).post(
        BAL + "changesets/", {"title": "T", "operations": operations}, format="json"
    )

    assert response.status_code == 400
    assert "operations[0].blocker" in response.json()["error"]["fields"]
    assert Changeset.objects.count() == 1


@pytest.mark.parametrize("kind", [{"a": 1}, ["ticket"]])
def test_a_create_whose_kind_is_not_a_string_is_a_field_error(setup, client_for, kind):
    operations = [{"op": "create", "kind": kind, "fields": {"title": "x"}}]

    response = client_for(setup["owner"]).post(
        BAL + "changesets/", {"title": "T", "operations": operations}, format="json"
    )

    assert response.status_code == 400
    assert "operations[0].kind" in response.json()["error"]["fields"]


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/projects/BAL%00/",
        BAL + "items/BAL-1%00/",
        BAL + "skills/plan%00ner/",
        BAL + "members/own%00er/",
        "/api/v1/projects/BAL%00/usage/",
    ],
)
def test_a_nul_in_the_path_is_not_found(setup, client_for, url):
    response = client_for(setup["owner"]).get(url)

    assert response.status_code in (404, 405), response.content  # members/<name>/ has no GET
    assert response.json()["error"]["code"] in ("not_found", "method_not_allowed")


def test_a_nul_in_a_path_that_writes_is_not_found(setup, client_for):
    response = client_for(setup["owner"]).delete(BAL + "members/own%00er/")

    assert response.status_code == 404
    assert Membership.objects.filter(user__username="owner").exists()


@pytest.mark.parametrize(
    ("query", "field"), [("?page=%00", "page"), ("?kind=%00", "kind"), ("?x%00=1", "x\\u0000")]
)
def test_a_nul_in_the_query_is_a_field_error(setup, client_for, query, field):
    response = client_for(setup["owner"]).get(BAL + "items/" + query)

    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {field: ["NUL characters are not allowed."]}


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/api/v1/knowledge/", {"kind": "note", "title": "T", "body": "a\x00", "projects": ["BAL"]}, "body"),
        ("/api/v1/planner/sessions/", {"project": "BAL", "title": "a\x00"}, "title"),
        (BAL, {"settings": {"max_rounds\x00": 3}}, "settings.max_rounds\\u0000"),
        (BAL + "changesets/", {"title": "T", "operations": [{"op": "create\x00"}]}, "operations[0].op"),
        (BAL + "changesets/", {"title": "T", "operations": [], "extra": ["\x00"]}, "extra[0]"),
    ],
)
def test_a_nul_anywhere_in_a_body_names_its_field(setup, client_for, url, body, field):
    before = _state()
    method = "patch" if url == BAL else "post"

    response = getattr(client_for(setup["owner"]), method)(url, body, format="json")

    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"] == {field: ["NUL characters are not allowed."]}
    assert _state() == before


@pytest.mark.parametrize(
    "session",
    [
        "0" * 34,
        "-" * 36,
        "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz",
        "00000000-0000-0000-0000-00000000000",
        "00000000-0000-0000-0000-000000000000",
    ],
)
@pytest.mark.django_db(transaction=True)  # the planner's async endpoints read on its database threads
@pytest.mark.parametrize("suffix", ["", "/", "/messages/", "/stop/"])
def test_a_malformed_session_id_is_not_found(setup, client_for, session, suffix):
    client = client_for(setup["owner"])
    url = f"/api/v1/planner/sessions/{session}{suffix}"

    response = client.post(url, {"text": "Hi"}, format="json") if suffix.count("/") == 2 else client.get(url)

    assert response.status_code == 404, response.content
    assert response.json()["error"]["code"] == "not_found"


def test_an_oversized_body_is_413_in_the_error_shape(setup, client_for, settings):
    raw = (
        '{"title": "T", "rationale": "' + "r" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE + '", "operations": []}'
    )

    response = client_for(setup["owner"]).generic(
        "POST", BAL + "changesets/", raw, content_type="application/json"
    )

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert Changeset.objects.count() == 1


@pytest.mark.parametrize("content_type", ["application/json", "application/x-www-form-urlencoded"])
def test_the_token_endpoint_refuses_deep_and_oversized_bodies(db, client_for, settings, content_type):
    if content_type == "application/json":
        raw = "[" * 100_000 + "]" * 100_000
        expected = (400, "parse_error")
    else:
        raw = "username=" + "u" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE + "&password=p"
        expected = (413, "request_too_large")

    response = client_for(None).generic("POST", "/api/v1/auth/token/", raw, content_type=content_type)

    assert (response.status_code, response.json()["error"]["code"]) == expected


@pytest.mark.parametrize("error", [OperationalError, InterfaceError])
def test_a_dropped_database_connection_is_a_503_not_a_500(monkeypatch, project, member, client_for, error):
    def dropped(*args, **kwargs):
        raise error("server closed the connection unexpectedly")

    monkeypatch.setattr(items_api, "item_list", dropped)
    response = client_for(member).get(f"/api/v1/projects/{project.key}/items/")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "unavailable"
