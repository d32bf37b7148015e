"""The REST permission matrix: every tracker endpoint by every role, strangers, anonymous, superuser.

Each row is one endpoint and the exact status each caller gets. State is built
through the real services; every case runs against a fresh database, so a write
that succeeds for one role does not change what the next role sees.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tracker.models import Changeset, Membership, Project, Skill, SkillPin
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose
from tracker.services.items import dependency_add
from tracker.services.skills import skill_version_create

CALLERS = ("viewer", "member", "maintainer", "owner", "stranger", "superuser", "anonymous")

READ = dict.fromkeys(("viewer", "member", "maintainer", "owner", "superuser"), 200) | {
    "stranger": 404,
    "anonymous": 401,
}


ROLES = ("viewer", "member", "maintainer", "owner")


def _only(ok: int, *allowed: str) -> dict[str, int]:
    """``ok`` for the roles in ``allowed`` and the superuser, 403 for the other roles."""
    statuses = {role: (ok if role in allowed else 403) for role in ROLES}
    return statuses | {"superuser": ok, "stranger": 404, "anonymous": 401}


class Case(NamedTuple):
    method: str
    path: str  # under /api/v1/projects/BAL/
    body: dict[str, Any] | None
    statuses: dict[str, int]


WRITE = ("member", "maintainer", "owner")
APPLY = ("maintainer", "owner")
ADMIN = ("owner",)

MATRIX = [
    Case("get", "", None, READ),
    Case("patch", "", {"name": "Renamed"}, _only(200, *ADMIN)),
    Case("patch", "", {"credential": "sk-secret"}, _only(200, *ADMIN)),
    Case("get", "members/", None, READ),
    # A role change of a member (a non-member is invited, never added: test_member_consent.py).
    Case("post", "members/", {"username": "member", "role": "member"}, _only(201, *ADMIN)),
    Case("delete", "members/viewer/", None, _only(204, *ADMIN)),
    Case("get", "items/", None, READ),
    Case("get", "items/?kind=ticket&state=ready&epic=BAL-1", None, READ),
    Case("get", "items/BAL-2/", None, READ),
    Case("get", "runnable/", None, READ),
    Case("get", "changesets/", None, READ),
    Case("get", "changesets/?status=proposed", None, READ),
    Case(
        "post",
        "changesets/",
        {"title": "Add", "operations": [{"op": "create", "kind": "ticket", "fields": {"title": "New"}}]},
        _only(201, *WRITE),
    ),
    Case("get", "changesets/1/", None, READ),
    Case("post", "changesets/1/apply/", None, _only(200, *APPLY)),
    Case("post", "changesets/1/reject/", {"note": "Not now."}, _only(200, *APPLY)),
    Case("get", "skills/", None, READ),
    Case("post", "skills/", {"name": "review", "body": "# Review"}, _only(201, *APPLY)),
    Case(
        "post", "skills/", {"name": "style", "body": "# Style", "scope": "organization"}, _only(201, *APPLY)
    ),
    Case("get", "skills/planner/", None, READ),
    Case("patch", "skills/planner/", {"pin": 1}, _only(200, *APPLY)),
]


@pytest.fixture
def plan(project, users, make_item, other_project):
    """An epic BAL-1 with a ready ticket BAL-2, a proposed changeset #1, a skill; the same in OTH."""
    epic = make_item(kind="epic", title="Epic")
    ticket = make_item(title="Ticket", epic=epic, state="ready")
    blocker = make_item(title="Blocker")
    dependency_add(actor=Actor(user=users["owner"]), blocker=blocker, blocked=ticket)
    changeset_propose(
        actor=Actor(user=users["member"]),
        project=project,
        title="Rename",
        operations=[
            {"op": "update", "item": ticket.key, "base_version": ticket.version, "fields": {"title": "T"}}
        ],
    )
    skill_version_create(actor=Actor(user=users["owner"]), project=project, name="planner", body="# Plan")
    User.objects.create(username="newcomer")
    outsider = User.objects.create(username="outsider", is_superuser=True)
    make_item(title="Foreign", target=other_project)
    skill_version_create(actor=Actor(user=outsider), project=other_project, name="planner", body="# Other")
    changeset_propose(
        actor=Actor(user=outsider),
        project=other_project,
        title="Other",
        operations=[{"op": "create", "kind": "ticket", "fields": {"title": "X"}}],
    )
    return users


def _client(plan: dict[str, Any], caller: str) -> APIClient:
    client = APIClient()
    if caller == "superuser":
        client.force_authenticate(User.objects.create(username="root", is_superuser=True, is_staff=True))
    elif caller != "anonymous":
        client.force_authenticate(plan[caller])
    return client


def _call(client: APIClient, method: str, url: str, body: dict[str, Any] | None) -> Any:
    return (
        getattr(client, method)(url, body, format="json")
        if body is not None
        else getattr(client, method)(url)
    )


def _ids(case: Case) -> str:
    return f"{case.method} {case.path}"


@pytest.mark.parametrize("case", MATRIX, ids=_ids)
@pytest.mark.parametrize("caller", CALLERS)
def test_permission_matrix(plan, caller, case):
    response = _call(_client(plan, caller), case.method, f"/api/v1/projects/BAL/{case.path}", case.body)

    assert response.status_code == case.statuses[caller], response.content
    if response.status_code >= 400:
        assert set(response.json()["error"]) >= {"code", "message"}


@pytest.mark.parametrize("case", MATRIX, ids=_ids)
@pytest.mark.parametrize("caller", ROLES)
def test_another_projects_objects_are_not_found(plan, caller, case):
    path = case.path.replace("BAL-", "OTH-")

    response = _call(_client(plan, caller), case.method, f"/api/v1/projects/OTH/{path}", case.body)

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("caller", CALLERS)
def test_an_organization_skill_needs_skill_write_in_every_project(plan, project, caller):
    """With a sibling project in BAL's organization that no role user belongs to, only a superuser may
    write what would reach the sibling's planner."""
    Project.objects.create(organization=project.organization, key="SIB", name="Sibling")
    body = {"name": "style", "body": "# Style", "scope": "organization"}

    response = _client(plan, caller).post("/api/v1/projects/BAL/skills/", body, format="json")

    expected = _only(403) | {"superuser": 201}
    assert response.status_code == expected[caller], response.content
    assert Skill.objects.filter(name="style").exists() == (caller == "superuser")


@pytest.mark.parametrize("caller", ["viewer", "owner", "stranger"])
def test_hidden_project_answers_like_a_missing_one(plan, caller):
    client = _client(plan, caller)

    hidden = client.get("/api/v1/projects/OTH/changesets/1/")
    missing = client.get("/api/v1/projects/NOPE/changesets/1/")

    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["error"]["message"].replace("OTH", "X") == missing.json()["error"][
        "message"
    ].replace("NOPE", "X")


@pytest.mark.parametrize(
    "path",
    ["items/OTH-1/", "changesets/2/", "skills/nope/", "members/outsider/"],
)
def test_foreign_or_unknown_objects_inside_a_readable_project_are_not_found(plan, path):
    client = _client(plan, "owner")

    response = (
        client.delete(f"/api/v1/projects/BAL/{path}")
        if "members" in path
        else client.get(f"/api/v1/projects/BAL/{path}")
    )

    assert response.status_code == 404


@pytest.mark.parametrize("caller", CALLERS)
def test_project_list_shows_readable_projects_only(plan, caller):
    response = _client(plan, caller).get("/api/v1/projects/")

    if caller == "anonymous":
        assert response.status_code == 401
        return
    keys = [p["key"] for p in response.json()["results"]]
    expected = {"superuser": ["BAL", "OTH"], "stranger": []}.get(caller, ["BAL"])
    assert keys == expected


def test_anonymous_gets_401_with_an_authenticate_challenge(plan):
    for method, url in [("get", "/api/v1/projects/"), ("post", "/api/v1/projects/BAL/changesets/")]:
        response = getattr(APIClient(), method)(url)

        assert response.status_code == 401
        assert response["WWW-Authenticate"] == 'Bearer realm="ballet"'
        assert response.json()["error"]["code"] == "not_authenticated"


def test_token_authentication(plan):
    token = Token.objects.create(user=plan["viewer"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")

    assert client.get("/api/v1/projects/BAL/").status_code == 200


def test_bad_token_is_401(plan):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")

    response = client.get("/api/v1/projects/")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


def test_session_authentication_with_csrf(plan):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(plan["member"])

    assert client.get("/api/v1/projects/BAL/").status_code == 200
    refused = client.post("/api/v1/projects/BAL/changesets/", {"title": "x", "operations": []}, format="json")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["error"]["message"]


def test_project_permissions_are_listed_for_the_caller(plan):
    viewer = _client(plan, "viewer").get("/api/v1/projects/BAL/").json()
    owner = _client(plan, "owner").get("/api/v1/projects/BAL/").json()

    assert viewer["permissions"] == ["knowledge.read", "skill.read", "tracker.read"]
    assert "project.admin" in owner["permissions"]


def test_writes_by_refused_callers_change_nothing(plan):
    for caller in ("viewer", "member", "stranger"):
        client = _client(plan, caller)
        client.post("/api/v1/projects/BAL/changesets/1/apply/")
        client.delete("/api/v1/projects/BAL/members/viewer/")
        client.patch("/api/v1/projects/BAL/skills/planner/", {"pin": 1}, format="json")

    assert Changeset.objects.get(project__key="BAL", number=1).status == "proposed"
    assert Membership.objects.filter(user__username="viewer").exists()
    assert not SkillPin.objects.exists()
