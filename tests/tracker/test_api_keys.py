"""API keys over REST: made, listed, shown once, kept as a hash, used within their scopes and never
beyond their user's roles, refused at once when revoked, expired or their user deactivated; a
project owner's view of the members' keys."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from planner.domain.services.chats import session_archive
from planner.domain.services.sessions import session_create
from tests.factories import make_key
from tracker.models import ApiKey, Changeset

pytestmark = pytest.mark.django_db

CHANGESET = {"title": "Add", "operations": [{"op": "create", "kind": "ticket", "fields": {"title": "New"}}]}


def bearer(key: str, scheme: str = "Bearer") -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {key}")
    return client


def signed_in(user: Any) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def created(user: Any, **body: Any) -> dict[str, Any]:
    response = signed_in(user).post(
        "/api/v1/keys/", {"name": "agent", "scopes": ["read"], **body}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def refusal(response: Any, status: int) -> dict[str, str]:
    assert response.status_code == status, response.content
    return response.json()["error"]


# --- made, shown once, kept as a hash ---------------------------------------------------------


def test_a_key_is_shown_once_and_kept_only_as_a_hash(member):
    made = created(member, name="laptop agent", scopes=["ask", "read"], expires_in_days=30)

    key = made["key"]
    prefix, secret = key.removeprefix("ballet_").split(".")
    assert (made["name"], made["prefix"], made["scopes"], made["status"]) == (
        "laptop agent",
        prefix,
        ["read", "ask"],
        "active",
    )
    assert made["last_used_at"] is None
    assert made["revoked_at"] is None
    expires = datetime.fromisoformat(made["expires_at"])
    assert abs(expires - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)
    listed = signed_in(member).get("/api/v1/keys/")
    assert [row["prefix"] for row in listed.json()["results"]] == [prefix]
    assert "key" not in listed.json()["results"][0]
    assert secret not in listed.content.decode()
    stored = ApiKey.objects.filter(user=member).values().get()
    assert not any(secret in str(value) for value in stored.values())
    assert stored["secret_hash"] == hashlib.sha256(secret.encode()).hexdigest()
    assert bearer(key).get("/api/v1/projects/BAL/").status_code == 200


@pytest.mark.parametrize("scheme", ["Bearer", "Token", "Api-Key", "bearer"])
def test_a_key_authenticates_as_bearer_token_or_api_key(member, scheme):
    key = make_key(member, "read")

    response = bearer(key, scheme).get("/api/v1/projects/")

    assert [project["key"] for project in response.json()["results"]] == ["BAL"]


def test_many_keys_per_user_newest_first(member, owner):
    for name in ("first", "second", "third"):
        make_key(member, "read", name=name)
    make_key(owner, "read", name="not yours")

    listed = signed_in(member).get("/api/v1/keys/").json()["results"]

    assert [row["name"] for row in listed] == ["third", "second", "first"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "", "scopes": ["read"]}, "name"),
        ({"name": "   ", "scopes": ["read"]}, "name"),
        ({"name": "two\nlines", "scopes": ["read"]}, "name"),
        ({"name": "x" * 101, "scopes": ["read"]}, "name"),
        ({"name": 7, "scopes": ["read"]}, "name"),
        ({"name": "agent", "scopes": []}, "scopes"),
        ({"name": "agent", "scopes": ["admin"]}, "scopes.0"),
        ({"name": "agent", "scopes": "read"}, "scopes"),
        ({"name": "agent", "scopes": ["read"], "expires_in_days": 0}, "expires_in_days"),
        ({"name": "agent", "scopes": ["read"], "expires_in_days": 10**30}, "expires_in_days"),
        ({"name": "agent", "scopes": ["read"], "expires_in_days": "7"}, "expires_in_days"),
        ({"name": "agent", "scopes": ["read"], "user": "owner"}, "user"),
    ],
)
def test_bad_input_to_create_a_key_is_a_field_error(member, body, field):
    response = signed_in(member).post("/api/v1/keys/", body, format="json")

    error = refusal(response, 400)
    assert field in error["fields"], error
    assert not ApiKey.objects.exists()


# --- refused at once ---------------------------------------------------------------------------


def test_a_revoked_key_is_refused_401_at_once(member):
    made = created(member)
    client = bearer(made["key"])
    assert client.get("/api/v1/projects/").status_code == 200

    assert signed_in(member).delete(f"/api/v1/keys/{made['id']}/").status_code == 204

    error = refusal(client.get("/api/v1/projects/"), 401)
    assert error["code"] == "authentication_failed"
    assert error["message"] == f"The API key {made['prefix']} (agent) was revoked; create another at /keys/."
    assert signed_in(member).delete(f"/api/v1/keys/{made['id']}/").status_code == 204  # again
    assert signed_in(member).get("/api/v1/keys/").json()["results"][0]["status"] == "revoked"


def test_an_expired_key_is_refused_401(member):
    made = created(member, expires_in_days=1)
    ApiKey.objects.filter(pk=made["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))

    error = refusal(bearer(made["key"]).get("/api/v1/projects/"), 401)

    assert error["message"].startswith(f"The API key {made['prefix']} (agent) expired at ")
    assert signed_in(member).get("/api/v1/keys/").json()["results"][0]["status"] == "expired"


def test_a_deactivated_users_keys_stop_at_once_and_a_password_change_leaves_them(member):
    key = make_key(member, "read")
    member.set_password("a-new-password")
    member.save(update_fields=["password"])
    assert bearer(key).get("/api/v1/projects/").status_code == 200

    member.is_active = False
    member.save(update_fields=["is_active"])

    assert refusal(bearer(key).get("/api/v1/projects/"), 401)["message"] == "User inactive or deleted."


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer ballet_short",
        "Bearer ballet_AAAAAAAAAAAA." + "B" * 40,  # well formed, no such key
        "Api-Key ballet_AAAAAAAAAAAA." + "B" * 39 + "-",
        "Token not-a-token",
    ],
)
def test_an_unknown_credential_is_refused_401(member, authorization):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=authorization)

    error = refusal(client.get("/api/v1/projects/"), 401)

    assert error["code"] == "authentication_failed"
    assert error["message"] in ("Invalid API key.", "Invalid token.")


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer",
        "Bearer two words",
        "Bearer ballet_" + "x" * 10_000,
        "Bearer ballet_ÿé²",
        "Basic ZGVtbzpkZW1v",
        "\x00",
    ],
)
def test_a_malformed_authorization_header_is_401_not_authenticated(member, authorization):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=authorization)

    error = refusal(client.get("/api/v1/projects/"), 401)

    assert error["code"] == "not_authenticated"


def test_a_key_of_another_user_cannot_be_revoked_through_keys(member, owner):
    theirs = created(owner)

    assert refusal(signed_in(member).delete(f"/api/v1/keys/{theirs['id']}/"), 404)["code"] == "not_found"
    assert refusal(signed_in(member).delete(f"/api/v1/keys/{2**63}/"), 404)["code"] == "not_found"
    assert bearer(theirs["key"]).get("/api/v1/projects/").status_code == 200


def test_last_used_is_written_at_most_once_a_minute(member):
    made = created(member)
    client = bearer(made["key"])

    client.get("/api/v1/projects/")
    first = ApiKey.objects.get(pk=made["id"]).last_used_at
    with CaptureQueriesContext(connection) as queries:
        client.get("/api/v1/projects/")

    assert first is not None
    assert ApiKey.objects.get(pk=made["id"]).last_used_at == first
    assert not [q for q in queries.captured_queries if q["sql"].startswith("UPDATE")]
    ApiKey.objects.filter(pk=made["id"]).update(last_used_at=first - timedelta(seconds=61))
    client.get("/api/v1/projects/")
    later = ApiKey.objects.get(pk=made["id"]).last_used_at
    assert later is not None
    assert later > first
    listed = signed_in(member).get("/api/v1/keys/").json()["results"][0]
    assert listed["last_used_at"] is not None


# --- scopes ------------------------------------------------------------------------------------

R, A, W, P, NO_KEY = "read", "ask", "work", "plan", None

# Every REST endpoint and method, and the scope an API key needs for it (None: no key may).
SCOPES = {
    "tracker-api:project-list GET": R,
    "tracker-api:project-detail GET": R,
    "tracker-api:project-detail PATCH": NO_KEY,
    "tracker-api:member-list GET": R,
    "tracker-api:member-list POST": NO_KEY,
    "tracker-api:member-detail DELETE": NO_KEY,
    "tracker-api:webhook-list GET": NO_KEY,
    "tracker-api:webhook-list POST": NO_KEY,
    "tracker-api:webhook-detail GET": NO_KEY,
    "tracker-api:webhook-detail PATCH": NO_KEY,
    "tracker-api:webhook-detail DELETE": NO_KEY,
    "tracker-api:webhook-deliveries GET": NO_KEY,
    "tracker-api:webhook-redeliver POST": NO_KEY,
    "tracker-api:webhook-ping POST": NO_KEY,
    "tracker-api:repository-list GET": R,
    "tracker-api:repository-list POST": NO_KEY,
    "tracker-api:repository-detail GET": R,
    "tracker-api:repository-detail PATCH": NO_KEY,
    "tracker-api:repository-detail DELETE": NO_KEY,
    "tracker-api:repository-fetch POST": NO_KEY,
    "tracker-api:invitation-list GET": NO_KEY,
    "tracker-api:invitation-list POST": NO_KEY,
    "tracker-api:invitation-detail DELETE": NO_KEY,
    "tracker-api:invitation-accept POST": NO_KEY,
    "tracker-api:invitation-decline POST": NO_KEY,
    "tracker-api:agent-list GET": NO_KEY,
    "tracker-api:agent-list POST": NO_KEY,
    "tracker-api:item-list GET": R,
    "tracker-api:item-detail GET": R,
    "tracker-api:item-detail PATCH": P,
    "tracker-api:runnable-list GET": R,
    "tracker-api:item-comments GET": R,
    "tracker-api:item-comments POST": P,
    "tracker-api:item-watch GET": R,
    "tracker-api:item-watch POST": P,
    "tracker-api:item-watch DELETE": P,
    "tracker-api:item-claim POST": W,
    "tracker-api:claim-list GET": R,
    "tracker-api:claim-detail GET": R,
    "tracker-api:claim-detail POST": W,
    "tracker-api:claim-reports GET": R,
    "tracker-api:claim-reports POST": W,
    "tracker-api:claim-release POST": W,
    "tracker-api:changeset-list GET": R,
    "tracker-api:changeset-list POST": P,
    "tracker-api:changeset-detail GET": R,
    "tracker-api:changeset-impact GET": R,
    "tracker-api:changeset-apply POST": P,
    "tracker-api:changeset-reject POST": P,
    "tracker-api:skill-list GET": R,
    "tracker-api:skill-list POST": P,
    "tracker-api:skill-detail GET": R,
    "tracker-api:skill-detail PATCH": P,
    "tracker-api:project-search GET": R,
    "tracker-api:key-list GET": R,
    "tracker-api:key-list POST": NO_KEY,
    "tracker-api:key-detail DELETE": NO_KEY,
    "tracker-api:project-key-list GET": R,
    "tracker-api:project-key-detail DELETE": NO_KEY,
    "knowledge-api:knowledge-list GET": R,
    "knowledge-api:knowledge-list POST": P,
    "knowledge-api:knowledge-detail GET": R,
    "knowledge-api:knowledge-detail PATCH": P,
    "planner-api:session-list GET": P,
    "planner-api:session-list POST": P,
    "planner-api:session-detail GET": P,
    "planner-api:session-detail PATCH": P,
    "planner-api:session-detail DELETE": P,
    "planner-api:session-messages POST": P,
    "planner-api:session-stop POST": P,
    "planner-api:session-retry POST": P,
    "planner-api:session-edit POST": P,
    "planner-api:session-answers POST": P,
    "planner-api:session-usage GET": P,
    "planner-api:session-drafts GET": P,
    "planner-api:draft-publish POST": P,
    "planner-api:draft-discard POST": P,
    "planner-api:inbox GET": R,
    "planner-api:inbox-dismiss POST": R,
    "planner-api:question-list GET": R,
    "planner-api:question-list POST": A,
    "planner-api:question-detail GET": R,
    "planner-api:event-list GET": R,
    "planner-api:event-stream GET": R,
    "planner-api:question-answer POST": A,
    "planner-api:question-confirm POST": A,
    "planner-api:question-withdraw POST": A,
    "planner-api:project-usage GET": R,
    "planner-api:item-brief GET": R,
}


def _endpoints() -> dict[str, str | None]:
    """``namespace:name METHOD`` → the scope the view names, for every BalletApi under /api/v1/."""
    found: dict[str, str | None] = {}
    for entry in get_resolver().url_patterns:
        if not (isinstance(entry, URLResolver) and str(entry.pattern) == "api/v1/"):
            continue
        for pattern in entry.url_patterns:
            assert isinstance(pattern, URLPattern)
            view = getattr(pattern.callback, "cls", None)
            if view is None or not hasattr(view, "scope_for"):
                continue  # auth/token/: username and password
            for method in ("get", "post", "patch", "put", "delete"):
                if hasattr(view, method):
                    found[f"{entry.namespace}:{pattern.name} {method.upper()}"] = view().scope_for(
                        method.upper()
                    )
    return found


def test_every_endpoint_names_the_scope_a_key_needs():
    assert _endpoints() == SCOPES


@pytest.mark.django_db(transaction=True)  # the planner's async endpoints read on its database threads
def test_a_read_key_reads_and_is_told_which_scope_a_write_needs(member, project):
    client = bearer(make_key(member, "read"))

    for path in ("items/", "changesets/", "questions/", "runnable/", "members/"):
        assert client.get(f"/api/v1/projects/BAL/{path}").status_code == 200, path
    assert client.get("/api/v1/knowledge/").status_code == 200
    proposed = refusal(client.post("/api/v1/projects/BAL/changesets/", CHANGESET, format="json"), 403)
    asked = refusal(client.post("/api/v1/projects/BAL/questions/", {"text": "Why?"}, format="json"), 403)
    chats = refusal(client.get("/api/v1/planner/sessions/"), 403)

    assert proposed == {
        "code": "missing_scope",
        "message": "This API key lacks the plan scope, which POST /api/v1/projects/BAL/changesets/ needs "
        "(it has read); create a key with plan at /keys/.",
    }
    assert "lacks the ask scope" in asked["message"]
    assert "lacks the plan scope" in chats["message"]
    assert not Changeset.objects.exists()


@pytest.mark.django_db(transaction=True)  # the planner's async endpoints read on its database threads
def test_an_ask_key_asks_but_does_not_read_the_plan(member, project):
    client = bearer(make_key(member, "ask"))

    assert "lacks the read scope" in refusal(client.get("/api/v1/projects/BAL/items/"), 403)["message"]
    # Past the scope check, to the question's own: it has no text.
    asked = refusal(client.post("/api/v1/projects/BAL/questions/", {}, format="json"), 400)
    assert list(asked["fields"]) == ["text"]


def test_a_plan_key_proposes_and_opens_planner_sessions(member, project):
    client = bearer(make_key(member, "plan"))

    assert client.post("/api/v1/projects/BAL/changesets/", CHANGESET, format="json").status_code == 201
    assert client.get("/api/v1/planner/sessions/").status_code == 200


@pytest.mark.django_db(transaction=True)  # the planner's async endpoints read on its database threads
def test_a_read_key_cannot_retry_edit_or_unarchive_a_chat(member, project):
    chat = session_create(user=member, project=project)
    session_archive(session_id=chat.pk, user=member)
    client = bearer(make_key(member, "read"))
    base = f"/api/v1/planner/sessions/{chat.pk}"
    for response in (
        client.post(f"{base}/retry/"),
        client.post(f"{base}/edit/", {"seq": 1, "text": "x"}, format="json"),
        client.patch(base, {"archived": False}, format="json"),
    ):
        assert refusal(response, 403)["code"] == "missing_scope"
    chat.refresh_from_db()
    assert chat.archived_at is not None


def test_a_key_never_goes_beyond_its_users_roles(viewer, owner, project):
    everything = bearer(make_key(viewer))

    refused = refusal(everything.post("/api/v1/projects/BAL/changesets/", CHANGESET, format="json"), 403)

    assert refused["code"] == "permission_denied"
    admin = refusal(bearer(make_key(owner)).patch("/api/v1/projects/BAL/", {"name": "X"}, format="json"), 403)
    assert admin["message"].startswith("An API key cannot be used for PATCH /api/v1/projects/BAL/")
    legacy = bearer(Token.objects.create(user=owner).key, "Token")
    assert legacy.patch("/api/v1/projects/BAL/", {"name": "X"}, format="json").status_code == 200


def test_a_session_and_the_legacy_token_are_not_limited_by_scopes(member, project):
    assert (
        signed_in(member).post("/api/v1/projects/BAL/changesets/", CHANGESET, format="json").status_code
        == 201
    )
    legacy = bearer(Token.objects.create(user=member).key, "Token")
    assert legacy.post("/api/v1/projects/BAL/changesets/", CHANGESET, format="json").status_code == 201
    assert (
        legacy.post("/api/v1/keys/", {"name": "from a script", "scopes": ["read"]}, format="json").status_code
        == 201
    )


def test_no_api_key_makes_or_revokes_keys(member):
    made = created(member)
    client = bearer(make_key(member))

    made_by_key = refusal(
        client.post("/api/v1/keys/", {"name": "more", "scopes": ["plan"]}, format="json"), 403
    )
    revoked_by_key = refusal(client.delete(f"/api/v1/keys/{made['id']}/"), 403)

    assert made_by_key["message"].startswith("An API key cannot be used for POST /api/v1/keys/")
    assert revoked_by_key["code"] == "missing_scope"
    assert client.get("/api/v1/keys/").json()["count"] == 2
    assert bearer(made["key"]).get("/api/v1/projects/").status_code == 200


# --- a project owner and the members' keys -----------------------------------------------------


@pytest.fixture
def keys(users, other_project) -> dict[str, dict[str, Any]]:
    """A key of each role user bound to BAL, and the stranger's (unbound: BAL is not theirs to bind).
    A project's owner once saw every key of its members; now only those bound to the project
    (issue 41, test_member_consent.py): each member also has an unbound key no owner sees."""
    made = {}
    for name, user in users.items():
        bound = {"projects": ["BAL"]} if name != "stranger" else {}
        made[name] = created(user, name=f"{name}'s agent", **bound)
        if name != "stranger":
            created(user, name=f"{name}'s own key")
    return made


def test_an_owner_lists_the_keys_bound_to_the_project_and_never_a_secret(users, keys):
    response = signed_in(users["owner"]).get("/api/v1/projects/BAL/keys/")

    assert response.status_code == 200
    rows = response.json()["results"]
    assert sorted((row["user"], row["name"]) for row in rows) == [
        (role, f"{role}'s agent") for role in ("maintainer", "member", "owner", "viewer")
    ]
    assert {"id", "prefix", "scopes", "last_used_at", "expires_at", "status"} <= set(rows[0])
    assert "key" not in rows[0]
    for made in keys.values():
        assert made["key"].split(".")[1] not in response.content.decode()


@pytest.mark.parametrize(
    ("caller", "path", "status"),
    [
        ("maintainer", "BAL", 403),
        ("member", "BAL", 403),
        ("viewer", "BAL", 403),
        ("stranger", "BAL", 404),
        ("owner", "OTH", 404),
    ],
)
def test_only_a_projects_owner_sees_its_members_keys(users, keys, caller, path, status):
    response = signed_in(users[caller]).get(f"/api/v1/projects/{path}/keys/")

    assert refusal(response, status)["code"] == ("not_found" if status == 404 else "permission_denied")


def test_an_owner_revokes_a_key_bound_to_the_project_and_no_one_elses(users, keys):
    owner = signed_in(users["owner"])
    member_key, stranger_key = keys["member"], keys["stranger"]
    own_key = ApiKey.objects.get(name="member's own key")
    assert refusal(owner.delete(f"/api/v1/projects/BAL/keys/{own_key.pk}/"), 404)["code"] == "not_found"

    assert owner.delete(f"/api/v1/projects/BAL/keys/{member_key['id']}/").status_code == 204
    assert (
        refusal(owner.delete(f"/api/v1/projects/BAL/keys/{stranger_key['id']}/"), 404)["code"] == "not_found"
    )
    assert (
        refusal(owner.delete(f"/api/v1/projects/OTH/keys/{stranger_key['id']}/"), 404)["code"] == "not_found"
    )
    refused = signed_in(users["member"]).delete(f"/api/v1/projects/BAL/keys/{keys['owner']['id']}/")

    assert refusal(refused, 403)["code"] == "permission_denied"
    assert refusal(bearer(member_key["key"]).get("/api/v1/projects/"), 401)["message"].endswith(
        "was revoked; create another at /keys/."
    )
    assert bearer(stranger_key["key"]).get("/api/v1/projects/").status_code == 200
    assert bearer(keys["owner"]["key"]).get("/api/v1/projects/").status_code == 200


def test_the_openapi_document_says_which_scope_each_operation_needs(member):
    schema = signed_in(member).get("/api/schema/?format=json").json()

    items = schema["paths"]["/api/v1/projects/{key}/items/"]["get"]
    asked = schema["paths"]["/api/v1/projects/{key}/questions/"]["post"]
    made = schema["paths"]["/api/v1/keys/"]["post"]
    assert items["description"] == "API keys need the read scope."
    assert asked["description"].endswith("\n\nAPI keys need the ask scope.")
    assert made["description"].endswith("\n\nNot with an API key.")
    assert schema["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    assert {"apiKey": []} in items["security"]
