"""PATCH /api/v1/projects/{key}/items/{item_key}/: an edit applied at once (200) or proposed (202),
stale versions (409), bad input (400), who may (viewers 403, other projects' members 404), and
the priority and label filters and runnable order it feeds."""

from __future__ import annotations

import pytest

from planner.domain.tools import call_tool
from tests.factories import make_key, make_membership
from tests.planner.domain.test_tools import ctx
from tracker.models import Changeset, ChangesetStatus, Item, Role, Scope

BAL = "/api/v1/projects/BAL/"


def url(item: Item) -> str:
    return f"{BAL}items/{item.key}/"


def fresh(item: Item) -> Item:
    return Item.objects.get(pk=item.pk)


def test_an_applied_edit_answers_the_item_and_its_changeset(member, client_for, make_item):
    blocker = make_item(title="Blocker")
    ticket = make_item(title="Old", state="ready")

    response = client_for(member).patch(
        url(ticket),
        {
            "version": 1,
            "title": "New",
            "priority": "high",
            "labels": ["docs", "bug"],
            "acceptance_criteria": ["It works"],
            "add_blockers": [blocker.key],
        },
        format="json",
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["applied"] is True
    assert Changeset.objects.get(number=body["changeset"]).status == ChangesetStatus.APPLIED
    assert (body["title"], body["priority"], body["labels"], body["version"]) == (
        "New",
        "high",
        ["bug", "docs"],
        2,
    )
    assert body["dependencies"]["blockers"][0]["key"] == blocker.key


def test_a_proposed_edit_answers_202_with_the_changesets_url(project, member, client_for, make_item):
    project.settings = {"direct_edits": "state"}
    project.save(update_fields=["settings"])
    ticket = make_item(title="Old")

    response = client_for(member).patch(url(ticket), {"version": 1, "title": "New"}, format="json")

    assert response.status_code == 202, response.content
    body = response.json()
    assert body["applied"] is False
    assert body["review_url"] == f"/projects/BAL/changesets/{body['changeset']}/"
    assert fresh(ticket).title == "Old"


def test_a_stale_version_is_409_with_the_current_version(member, client_for, make_item):
    ticket = make_item(state="ready")
    client_for(member).patch(url(ticket), {"version": 1, "title": "First"}, format="json")

    response = client_for(member).patch(url(ticket), {"version": 1, "title": "Second"}, format="json")

    assert response.status_code == 409
    assert response.json()["error"]["current"]["version"] == 2
    assert fresh(ticket).title == "First"


def test_a_disallowed_move_names_the_allowed_ones(member, client_for, make_item):
    ticket = make_item(state="draft")

    response = client_for(member).patch(url(ticket), {"version": 1, "state": "done"}, format="json")

    assert response.status_code == 400
    message = response.json()["error"]["fields"]["state"][0]
    assert "ready" in message
    assert "cancelled" in message


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": "x"}, "version"),
        ({"version": "1", "title": "x"}, "version"),
        ({"version": 1, "colour": "red"}, "colour"),
        ({"version": 1, "kind": "epic"}, "kind"),
        ({"version": 1, "title": "x" * 201}, "title"),
        ({"version": 1, "title": 5}, "title"),
        ({"version": 1, "state": "finished"}, "state"),
        ({"version": 1, "priority": "asap"}, "priority"),
        ({"version": 1, "labels": ["nope"]}, "labels"),
        ({"version": 1, "labels": "bug"}, "labels"),
        ({"version": 1, "epic": "BAL-99"}, "epic"),
        ({"version": 1, "add_blockers": ["BAL-99"]}, "add_blockers"),
        ({"version": 1, "remove_blockers": ["BAL-1"]}, "remove_blockers"),
        ({"version": 1, "policy": {"review": "none"}}, "policy"),
        ({"version": 1, "description": "a\u0000b"}, "description"),
        ({"version": 1}, "non_field_errors"),
    ],
)
def test_bad_input_is_400_and_stores_nothing(member, client_for, make_item, body, field):
    make_item(title="First")
    ticket = make_item(title="Target")

    response = client_for(member).patch(url(ticket), body, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not Changeset.objects.exists()
    assert fresh(ticket).version == 1


def test_a_body_that_is_not_an_object_is_400(member, client_for, make_item):
    ticket = make_item()
    response = client_for(member).patch(url(ticket), [1, 2], format="json")
    assert response.status_code == 400


def test_a_viewer_gets_403_and_another_projects_member_404(
    viewer, other_project, client_for, make_item, users
):
    ticket = make_item()
    outsider = users["stranger"]
    make_membership(project=other_project, user=outsider, role=Role.OWNER)

    assert (
        client_for(viewer).patch(url(ticket), {"version": 1, "title": "x"}, format="json").status_code == 403
    )
    response = client_for(outsider).patch(url(ticket), {"version": 1, "title": "x"}, format="json")
    assert response.status_code == 404
    assert client_for(None).patch(url(ticket), {"version": 1}, format="json").status_code == 401
    assert fresh(ticket).title == "A ticket"


def test_an_unknown_item_is_404(member, client_for, make_item):
    make_item()
    response = client_for(member).patch(f"{BAL}items/BAL-99/", {"version": 1, "title": "x"}, format="json")
    assert response.status_code == 404


def test_api_keys_need_the_plan_scope(api_client, member, make_item):
    ticket = make_item()
    read_only = make_key(member, Scope.READ, name="reader")
    planning = make_key(member, Scope.PLAN, name="planner")

    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {read_only}")
    assert api_client.patch(url(ticket), {"version": 1, "title": "x"}, format="json").status_code == 403
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {planning}")
    assert api_client.patch(url(ticket), {"version": 1, "title": "x"}, format="json").status_code == 200
    assert fresh(ticket).title == "x"


def test_items_filter_by_priority_and_label(viewer, member, client_for, make_item):
    urgent = make_item(title="Urgent bug", priority="urgent", labels=["bug"])
    make_item(title="Normal docs", labels=["docs", "feature"])
    make_item(title="Low", priority="low")

    def titles(query: str) -> list[str]:
        response = client_for(viewer).get(f"{BAL}items/{query}")
        assert response.status_code == 200, response.content
        return [item["title"] for item in response.json()["results"]]

    assert titles("?priority=urgent") == [urgent.title]
    assert titles("?label=feature") == ["Normal docs"]
    assert titles("?label=bug&priority=urgent") == ["Urgent bug"]
    assert titles("?label=bu") == []
    assert client_for(viewer).get(f"{BAL}items/?priority=asap").status_code == 400


def test_runnable_tickets_are_listed_by_priority_then_number(viewer, client_for, make_item):
    make_item(title="Low", state="ready", priority="low")
    make_item(title="Normal", state="ready")
    make_item(title="Urgent", state="ready", priority="urgent")
    make_item(title="High", state="ready", priority="high")
    make_item(title="Urgent too", state="ready", priority="urgent")

    response = client_for(viewer).get(f"{BAL}runnable/")

    titles = [item["title"] for item in response.json()["results"]]
    assert titles == ["Urgent", "Urgent too", "High", "Normal", "Low"]


def test_the_planners_runnable_list_has_the_rest_order(project, viewer, client_for, make_item):
    make_item(title="Low", state="ready", priority="low", labels=["docs"])
    make_item(title="Normal", state="ready")
    make_item(title="Urgent", state="ready", priority="urgent", labels=["bug", "security"])

    outcome = call_tool("list_runnable", {}, ctx(viewer, project))
    rest = client_for(viewer).get(f"{BAL}runnable/").json()["results"]

    assert not outcome.is_error, outcome.output
    tickets = outcome.output["tickets"]
    assert [t["title"] for t in tickets] == [r["title"] for r in rest] == ["Urgent", "Normal", "Low"]
    assert [(t["priority"], t["labels"]) for t in tickets] == [(r["priority"], r["labels"]) for r in rest]
    assert tickets[0]["labels"] == ["bug", "security"]
