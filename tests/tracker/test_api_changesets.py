"""Changesets over REST: propose, read, apply all or nothing, reject, four eyes, immutability."""

from __future__ import annotations

import pytest

from tracker.models import ActivityEvent, Changeset, ChangesetStatus, Item
from tracker.services.activity import Actor
from tracker.services.items import item_update

BAL = "/api/v1/projects/BAL/"


def create_ops(title: str = "Login") -> list[dict]:
    return [
        {"op": "create", "ref": "login", "kind": "ticket", "fields": {"title": title, "state": "ready"}},
        {"op": "create", "ref": "docs", "kind": "ticket", "fields": {"title": "Docs"}},
        {"op": "add_dependency", "blocker": "$login", "blocked": "$docs"},
    ]


def propose(client, operations=None, title="Plan change", rationale="Because."):
    return client.post(
        BAL + "changesets/",
        {"title": title, "rationale": rationale, "operations": operations or create_ops()},
        format="json",
    )


def test_member_proposes(project, member, client_for):
    response = propose(client_for(member))

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["number"] == 1
    assert body["title"] == "Plan change"
    assert body["rationale"] == "Because."
    assert body["status"] == "proposed"
    assert body["operations"] == create_ops()
    assert body["proposed_by"] == "member"
    assert body["planner_session"] is None
    assert body["decided_by"] is None
    assert body["decided_at"] is None
    assert body["decision_note"] == ""
    assert body["conflict_reason"] == ""
    assert body["created_items"] == {}
    assert body["created_at"]
    assert not Item.objects.exists()
    assert ActivityEvent.objects.filter(verb="changeset.proposed", target="changeset:1").exists()


def test_changeset_is_read_back(project, member, viewer, client_for):
    propose(client_for(member))

    body = client_for(viewer).get(BAL + "changesets/1/").json()

    assert body["number"] == 1
    assert body["proposed_by"] == "member"


def test_list_filters_by_status(project, member, maintainer, client_for):
    client = client_for(member)
    propose(client, title="First")
    propose(client, title="Second")
    client_for(maintainer).post(BAL + "changesets/1/reject/", {"note": "No."}, format="json")

    def numbers(query: str) -> list[int]:
        return [c["number"] for c in client.get(BAL + "changesets/" + query).json()["results"]]

    assert numbers("") == [2, 1]
    assert numbers("?status=proposed") == [2]
    assert numbers("?status=rejected") == [1]
    assert numbers("?status=applied") == []


def test_maintainer_applies(project, member, maintainer, client_for):
    propose(client_for(member))

    response = client_for(maintainer).post(BAL + "changesets/1/apply/")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "applied"
    assert body["decided_by"] == "maintainer"
    assert body["decided_at"]
    assert body["created_items"] == {"login": "BAL-1", "docs": "BAL-2"}
    docs = client_for(member).get(BAL + "items/BAL-2/").json()
    assert docs["dependencies"]["blockers"] == [{"key": "BAL-1", "title": "Login", "state": "ready"}]
    assert ActivityEvent.objects.filter(verb="changeset.applied").exists()


def test_stale_base_version_conflicts_with_nothing_applied(owner, member, maintainer, make_item, client_for):
    ticket = make_item(title="Old title")
    operations = [
        {"op": "create", "kind": "ticket", "fields": {"title": "New one"}},
        {"op": "update", "item": ticket.key, "base_version": 1, "fields": {"title": "Renamed"}},
    ]
    propose(client_for(member), operations)
    item_update(actor=Actor(user=owner), item=ticket, fields={"title": "Changed meanwhile"})

    response = client_for(maintainer).post(BAL + "changesets/1/apply/")

    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "conflict"
    assert "stale" in error["message"]
    assert error["current"]["status"] == "conflicted"
    assert error["current"]["conflict_reason"] == error["message"]
    assert Changeset.objects.get(number=1).status == ChangesetStatus.CONFLICTED
    assert list(Item.objects.values_list("title", flat=True)) == ["Changed meanwhile"]


def test_reject_with_a_note(project, member, maintainer, client_for):
    propose(client_for(member))

    response = client_for(maintainer).post(
        BAL + "changesets/1/reject/", {"note": "  Too big.  "}, format="json"
    )

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "rejected"
    assert body["decision_note"] == "Too big."
    assert body["decided_by"] == "maintainer"
    assert not Item.objects.exists()


def test_reject_without_a_note(project, member, maintainer, client_for):
    propose(client_for(member))

    response = client_for(maintainer).post(BAL + "changesets/1/reject/")

    assert response.status_code == 200
    assert response.json()["decision_note"] == ""


@pytest.mark.parametrize(
    ("first", "then"),
    [("apply", "apply"), ("apply", "reject"), ("reject", "apply"), ("reject", "reject")],
)
def test_decided_changeset_cannot_change(member, maintainer, client_for, first, then):
    propose(client_for(member))
    client = client_for(maintainer)
    assert client.post(BAL + f"changesets/1/{first}/").status_code == 200
    before = client.get(BAL + "changesets/1/").json()

    response = client.post(BAL + f"changesets/1/{then}/")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "invalid_state"
    assert client.get(BAL + "changesets/1/").json() == before


def test_conflicted_changeset_cannot_be_applied_again(owner, member, maintainer, make_item, client_for):
    ticket = make_item()
    propose(
        client_for(member),
        [{"op": "update", "item": ticket.key, "base_version": 1, "fields": {"title": "x"}}],
    )
    item_update(actor=Actor(user=owner), item=ticket, fields={"title": "moved on"})
    client = client_for(maintainer)
    assert client.post(BAL + "changesets/1/apply/").status_code == 409

    response = client.post(BAL + "changesets/1/apply/")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "invalid_state"


def test_four_eyes_refuses_a_self_apply(project, owner, maintainer, client_for):
    project.settings = {"four_eyes": True}
    project.save()
    propose(client_for(maintainer))

    refused = client_for(maintainer).post(BAL + "changesets/1/apply/")

    assert refused.status_code == 403
    assert "four eyes" in refused.json()["error"]["message"]
    assert Changeset.objects.get(number=1).status == ChangesetStatus.PROPOSED
    applied = client_for(owner).post(BAL + "changesets/1/apply/")
    assert applied.status_code == 200
    assert applied.json()["decided_by"] == "owner"


def test_four_eyes_set_over_rest_is_enforced(project, owner, client_for):
    client = client_for(owner)
    client.patch(BAL, {"settings": {"four_eyes": True}}, format="json")
    propose(client)

    assert client.post(BAL + "changesets/1/apply/").status_code == 403
    assert client.post(BAL + "changesets/1/reject/").status_code == 200


def test_self_apply_without_four_eyes(project, maintainer, client_for):
    client = client_for(maintainer)
    propose(client)

    assert client.post(BAL + "changesets/1/apply/").status_code == 200


def test_member_cannot_set_policy_but_maintainer_can(project, member, maintainer, client_for):
    operations = [{"op": "create", "kind": "ticket", "fields": {"title": "T", "policy": {"max_minutes": 30}}}]

    refused = propose(client_for(member), operations)
    accepted = propose(client_for(maintainer), operations)

    assert refused.status_code == 400
    assert "operations[0].fields.policy" in refused.json()["error"]["fields"]
    assert accepted.status_code == 201


def test_field_errors_name_the_operation(project, member, make_item, client_for):
    make_item(kind="epic", title="E")
    operations = [
        {"op": "create", "kind": "ticket", "fields": {"title": "ok"}},
        {"op": "add_dependency", "blocker": "$nope", "blocked": "BAL-1"},
        {"op": "update", "item": "BAL-1", "base_version": 1, "fields": {"state": "ready"}},
    ]

    response = propose(client_for(member), operations)

    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert set(fields) == {"operations[1].blocker", "operations[2].fields.state"}
    assert not Changeset.objects.exists()


def test_apply_keeps_a_note_and_refuses_unknown_fields(project, member, maintainer, client_for):
    propose(client_for(member))
    client = client_for(maintainer)

    refused = client.post(BAL + "changesets/1/apply/", {"notes": "typo"}, format="json")
    applied = client.post(BAL + "changesets/1/apply/", {"note": "Ship it."}, format="json")

    assert refused.status_code == 400, refused.content
    assert applied.status_code == 200, applied.content
    assert (applied.json()["status"], applied.json()["decision_note"]) == ("applied", "Ship it.")
