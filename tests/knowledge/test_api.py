"""The knowledge base over REST: permissions, links, filters, versions and conflicts, bad input."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from knowledge.models import KnowledgeEntry, KnowledgeRevision
from knowledge.services import knowledge_create, knowledge_update
from tracker.models import Membership, Project
from tracker.services.activity import Actor

LIST = "/api/v1/knowledge/"


@pytest.fixture
def entries(project, other_project, users, make_item, indexed):
    """BAL-1 and a decision linked to it; a note in another organization."""
    ticket = make_item(title="Ticket")
    with indexed():
        decision = knowledge_create(
            actor=Actor(user=users["member"]),
            kind="decision",
            title="Use SQLite in embedded mode",
            body="We decided on SQLite.",
            projects=[project],
            items=[ticket],
        )
        root = User.objects.create(username="root", is_superuser=True)
        foreign = knowledge_create(
            actor=Actor(user=root), kind="note", title="Other org note", projects=[other_project]
        )
    return {"decision": decision, "foreign": foreign, "ticket": ticket}


def _client(users, caller: str) -> APIClient:
    client = APIClient()
    if caller == "superuser":
        client.force_authenticate(User.objects.create(username="admin", is_superuser=True))
    elif caller != "anonymous":
        client.force_authenticate(users[caller])
    return client


def _detail(entry: KnowledgeEntry) -> str:
    return f"{LIST}{entry.pk}/"


CALLERS = ("viewer", "member", "maintainer", "owner", "stranger", "superuser", "anonymous")


@pytest.mark.parametrize(
    ("caller", "expected"),
    [
        ("viewer", (1, 200, 403, 403)),
        ("member", (1, 200, 201, 200)),
        ("maintainer", (1, 200, 201, 200)),
        ("owner", (1, 200, 201, 200)),
        ("stranger", (0, 404, 400, 404)),
        ("superuser", (2, 200, 201, 200)),
        ("anonymous", (None, 401, 401, 401)),
    ],
)
def test_permission_matrix(entries, users, caller, expected):
    listed, read, create, update = expected
    client = _client(users, caller)
    decision = entries["decision"]

    listing = client.get(LIST)
    detail = client.get(_detail(decision))
    created = client.post(LIST, {"kind": "note", "title": "New", "projects": ["BAL"]}, format="json")
    updated = client.patch(_detail(decision), {"version": 1, "title": "Renamed"}, format="json")

    if listed is None:
        assert listing.status_code == 401
    else:
        assert listing.json()["count"] == listed
    assert (detail.status_code, created.status_code, updated.status_code) == (read, create, update)


@pytest.mark.parametrize("caller", ["viewer", "member", "maintainer", "owner", "stranger"])
def test_another_organizations_entry_is_not_found(entries, users, caller):
    client = _client(users, caller)
    foreign = _detail(entries["foreign"])

    assert client.get(foreign).status_code == 404
    assert client.patch(foreign, {"version": 1, "title": "Mine now"}, format="json").status_code == 404
    assert client.get(LIST + "?project=OTH").status_code == 404
    assert client.get(f"{LIST}999999/").status_code == 404
    assert KnowledgeEntry.objects.get(pk=entries["foreign"].pk).title == "Other org note"


def test_create_with_links(entries, users):
    response = _client(users, "member").post(
        LIST,
        {
            "kind": "debt",
            "title": " Flaky test ",
            "body": "It flakes.\n",
            "projects": ["BAL"],
            "items": ["BAL-1"],
        },
        format="json",
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["kind"] == "debt"
    assert body["title"] == "Flaky test"
    assert body["body"] == "It flakes.\n"
    assert body["version"] == 1
    assert body["author"] == body["last_editor"] == "member"
    assert body["projects"] == ["BAL"]
    assert body["items"] == ["BAL-1"]
    assert [r["version"] for r in body["revisions"]] == [1]


def test_detail_shows_links_and_revisions(entries, users):
    body = _client(users, "viewer").get(_detail(entries["decision"])).json()

    assert body["body"] == "We decided on SQLite."
    assert body["projects"] == ["BAL"]
    assert body["items"] == ["BAL-1"]
    assert body["revisions"][0]["version"] == 1
    assert body["revisions"][0]["editor"] == "member"
    assert body["revisions"][0]["created_at"]


def test_an_entry_linked_to_a_project_the_caller_cannot_read_leaves_no_trace(
    entries, org, users, project, make_item, indexed
):
    hidden = Project.objects.create(organization=org, key="HID", name="HID")
    insider = User.objects.create(username="insider")
    Membership.objects.create(project=hidden, user=insider, role="owner")
    Membership.objects.create(project=project, user=insider, role="owner")
    secret_item = make_item(title="Confidential launch", target=hidden)
    with indexed():
        entry = knowledge_create(
            actor=Actor(user=insider),
            kind="note",
            title="Merger codename Bluebird",
            body="Only for HID.",
            projects=[project, hidden],
            items=[secret_item],
        )
    viewer, member = _client(users, "viewer"), _client(users, "member")

    assert viewer.get(_detail(entry)).status_code == 404
    for query in ("", "?project=BAL", "?q=bluebird", "?kind=note"):
        listing = viewer.get(LIST + query)
        assert listing.status_code == 200
        assert "Bluebird" not in listing.content.decode()
        assert "HID" not in listing.content.decode()
    # A round trip cannot drop the links the caller cannot see: the entry is not theirs to touch.
    dropped = member.patch(_detail(entry), {"version": 1, "projects": ["BAL"], "items": []}, format="json")
    assert dropped.status_code == 404
    entry.refresh_from_db()
    assert entry.version == 1
    assert sorted(p.key for p in entry.projects.all()) == ["BAL", "HID"]
    assert [i.key for i in entry.items.all()] == [secret_item.key]
    # Who reads both projects reads the entry and all its links.
    insider_view = APIClient()
    insider_view.force_authenticate(insider)
    body = insider_view.get(_detail(entry)).json()
    assert (sorted(body["projects"]), body["items"]) == (["BAL", "HID"], [secret_item.key])


def test_an_entry_without_project_links_is_read_by_every_member_of_the_organization(
    entries, org, users, project
):
    sibling = Project.objects.create(organization=org, key="SIB", name="SIB")
    reader = users["stranger"]
    Membership.objects.create(project=sibling, user=reader, role="viewer")
    entry = entries["decision"]
    entry.projects.clear()
    entry.items.clear()

    client = APIClient()
    client.force_authenticate(reader)
    assert client.get(_detail(entry)).json()["title"] == "Use SQLite in embedded mode"
    assert [e["title"] for e in client.get(LIST).json()["results"]] == ["Use SQLite in embedded mode"]


@pytest.mark.parametrize(
    ("query", "titles"),
    [
        ("", ["Runbook", "Use SQLite in embedded mode"]),
        ("?kind=decision", ["Use SQLite in embedded mode"]),
        ("?kind=document", ["Runbook"]),
        ("?q=sqlite", ["Use SQLite in embedded mode"]),
        ("?q=restart+server", ["Runbook"]),
        ("?q=nothing-like-this", []),
        ("?project=BAL", ["Use SQLite in embedded mode"]),
        ("?project=SIB", ["Runbook"]),
        ("?kind=&q=&project=", ["Runbook", "Use SQLite in embedded mode"]),
    ],
)
def test_filters(entries, org, users, query, titles, indexed):
    sibling = Project.objects.create(organization=org, key="SIB", name="SIB")
    Membership.objects.create(project=sibling, user=users["viewer"], role="viewer")
    root = User.objects.create(username="archivist", is_superuser=True)
    with indexed():
        knowledge_create(
            actor=Actor(user=root),
            kind="document",
            title="Runbook",
            body="Restart the server.",
            projects=[sibling],
        )

    response = _client(users, "viewer").get(LIST + query)

    assert response.status_code == 200
    assert [e["title"] for e in response.json()["results"]] == titles


def test_update_keeps_every_revision(entries, users):
    client = _client(users, "member")
    url = _detail(entries["decision"])

    first = client.patch(url, {"version": 1, "body": "SQLite, with WAL."}, format="json")
    second = _client(users, "owner").patch(
        url, {"version": 2, "kind": "document", "title": "Storage"}, format="json"
    )

    assert first.status_code == second.status_code == 200
    body = second.json()
    assert (body["version"], body["kind"], body["title"], body["body"]) == (
        3,
        "document",
        "Storage",
        "SQLite, with WAL.",
    )
    assert body["last_editor"] == "owner"
    assert body["author"] == "member"
    assert [(r["version"], r["editor"]) for r in body["revisions"]] == [
        (3, "owner"),
        (2, "member"),
        (1, "member"),
    ]
    revisions = KnowledgeRevision.objects.filter(entry=entries["decision"]).order_by("version")
    assert list(revisions.values_list("body", flat=True)) == [
        "We decided on SQLite.",
        "SQLite, with WAL.",
        "SQLite, with WAL.",
    ]


def test_stale_version_is_a_conflict_with_the_current_entry(entries, users):
    decision = entries["decision"]
    knowledge_update(actor=Actor(user=users["owner"]), entry=decision, version=1, fields={"body": "Newer."})

    response = _client(users, "member").patch(
        _detail(decision), {"version": 1, "body": "Mine."}, format="json"
    )

    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "conflict"
    assert error["current"] == {
        "id": decision.pk,
        "kind": "decision",
        "title": "Use SQLite in embedded mode",
        "body": "Newer.",
        "version": 2,
    }
    decision.refresh_from_db()
    assert (decision.version, decision.body) == (2, "Newer.")
    assert decision.revisions.count() == 2


def test_relinking(entries, users, make_item):
    make_item(title="Second")

    response = _client(users, "member").patch(
        _detail(entries["decision"]), {"version": 1, "items": ["BAL-2", "BAL-1"]}, format="json"
    )

    assert response.status_code == 200
    assert sorted(response.json()["items"]) == ["BAL-1", "BAL-2"]


BAD_CREATE = [
    ({"kind": "poem", "title": "T", "projects": ["BAL"]}, "kind"),
    ({"title": "T", "projects": ["BAL"]}, "kind"),
    ({"kind": "note", "title": 5, "projects": ["BAL"]}, "title"),
    ({"kind": "note", "title": "t" * 201, "projects": ["BAL"]}, "title"),
    ({"kind": "note", "title": "   ", "projects": ["BAL"]}, "title"),
    ({"kind": "note", "title": "T", "body": ["x"], "projects": ["BAL"]}, "body"),
    ({"kind": "note", "title": "T", "body": "b" * 200_001, "projects": ["BAL"]}, "body"),
    ({"kind": "note", "title": "T", "projects": "BAL"}, "projects"),
    ({"kind": "note", "title": "T", "projects": []}, "projects"),
    ({"kind": "note", "title": "T", "projects": ["NOPE"]}, "projects"),
    ({"kind": "note", "title": "T", "projects": ["OTH"]}, "projects"),
    ({"kind": "note", "title": "T", "projects": [5]}, "projects.0"),
    ({"kind": "note", "title": "T", "projects": ["BAL"], "items": ["BAL-99"]}, "items"),
    ({"kind": "note", "title": "T", "projects": ["BAL"], "items": ["OTH-1"]}, "items"),
    ({"kind": "note", "title": "T", "projects": ["BAL"], "items": ["BAL-99999999999999999999"]}, "items"),
    ({"kind": "note", "title": "T", "projects": ["BAL"], "items": "BAL-1"}, "items"),
    ({"kind": "note", "title": "T", "projects": ["BAL"], "colour": "blue"}, "colour"),
]

BAD_UPDATE = [
    ({"title": "T"}, "version"),
    ({"version": "1", "title": "T"}, "version"),
    ({"version": True, "title": "T"}, "version"),
    ({"version": 10**40, "title": "T"}, "version"),
    ({"version": 1, "kind": "poem"}, "kind"),
    ({"version": 1, "title": ""}, "title"),
    ({"version": 1, "title": "t" * 201}, "title"),
    ({"version": 1, "body": None}, "body"),
    ({"version": 1, "projects": []}, "projects"),
    ({"version": 1, "projects": ["OTH"]}, "projects"),
    ({"version": 1, "items": ["BAL-42"]}, "items"),
    ({"version": 1, "colour": "blue"}, "colour"),
]


@pytest.mark.parametrize(("payload", "field"), BAD_CREATE)
def test_bad_create_names_the_field(entries, users, payload, field):
    response = _client(users, "member").post(LIST, payload, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert KnowledgeEntry.objects.count() == 2


@pytest.mark.parametrize(("payload", "field"), BAD_UPDATE)
def test_bad_update_names_the_field(entries, users, payload, field):
    response = _client(users, "member").patch(_detail(entries["decision"]), payload, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    entries["decision"].refresh_from_db()
    assert entries["decision"].version == 1


@pytest.mark.parametrize("method", ["post", "patch"])
@pytest.mark.parametrize("raw", ['{"kind": ', "[]", "null"])
def test_malformed_bodies_are_400(entries, users, method, raw):
    url = LIST if method == "post" else _detail(entries["decision"])

    response = _client(users, "member").generic(method.upper(), url, raw, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["error"]["code"] in {"parse_error", "invalid"}


@pytest.mark.parametrize("query", ["?kind=poem", "?q=" + "x" * 201, "?project=" + "P" * 11])
def test_bad_filters_are_400(entries, users, query):
    response = _client(users, "viewer").get(LIST + query)

    assert response.status_code == 400
    assert query[1:].split("=")[0] in response.json()["error"]["fields"]


def test_knowledge_list_queries_do_not_grow(entries, users, make_item, django_assert_max_num_queries):
    client = _client(users, "viewer")
    for number in range(20):
        item = make_item(title=f"T{number}")
        project = Project.objects.get(key="BAL")
        knowledge_create(
            actor=Actor(user=users["member"]),
            kind="note",
            title=f"N{number}",
            projects=[project],
            items=[item],
        )

    with django_assert_max_num_queries(8):
        response = client.get(LIST)

    assert response.json()["count"] == 21
