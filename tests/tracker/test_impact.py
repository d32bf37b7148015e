"""A changeset's impact: what applying it would change in what can run, computed by trying its
operations and rolling them back, so that nothing of the trial stays; and over REST."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from tests.factories import MembershipFactory, ProjectFactory, UserFactory, make_key
from tracker.graph.impact import Impact, ImpactTicket, changeset_impact
from tracker.models import (
    ActivityEvent,
    Changeset,
    ChangesetStatus,
    Dependency,
    Item,
    Organization,
    Project,
    Role,
)
from tracker.selectors import item_get
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose, changeset_reject
from tracker.services.items import dependency_add, item_update
from tracker.signals import changeset_decided

BAL = "/api/v1/projects/BAL/"


def propose(member: Any, project: Project, *operations: dict[str, Any]) -> Changeset:
    return changeset_propose(
        actor=Actor(user=member), project=project, title="Plan change", operations=list(operations)
    )


def keys(tickets: tuple[ImpactTicket, ...]) -> list[str]:
    return [ticket.key for ticket in tickets]


@pytest.fixture
def chain(make_item, owner) -> list[Item]:
    """BAL-1 (in progress) blocks BAL-2 (ready); BAL-3 is ready and free."""
    first = make_item(title="Schema", state="in_progress")
    second = make_item(title="API", state="ready")
    third = make_item(title="Docs", state="ready")
    dependency_add(actor=Actor(user=owner), blocker=first, blocked=second)
    return [first, second, third]


def test_adding_a_dependency_blocks_a_runnable_ticket_and_grows_the_chain(project, member, chain):
    changeset = propose(member, project, {"op": "add_dependency", "blocker": "BAL-2", "blocked": "BAL-3"})

    impact = changeset_impact(changeset=changeset)

    assert impact.unavailable == ""
    assert impact.stops_runnable == (ImpactTicket(key="BAL-3", title="Docs"),)
    assert keys(impact.becomes_blocked) == ["BAL-3"]
    assert impact.becomes_runnable == ()
    assert impact.unblocked == ()
    assert keys(impact.chain_before) == ["BAL-1", "BAL-2"]
    assert keys(impact.chain_after) == ["BAL-1", "BAL-2", "BAL-3"]
    assert impact.chain_after[2].title == "Docs"
    assert impact.graph_before is not None
    assert impact.graph_after is not None
    assert ("BAL-2", "BAL-3") in impact.graph_after.edges
    assert ("BAL-2", "BAL-3") not in impact.graph_before.edges
    assert not Dependency.objects.filter(blocker=chain[1], blocked=chain[2]).exists()


def test_marking_a_blocker_done_makes_its_dependants_runnable(project, member, owner, chain):
    dependency_add(actor=Actor(user=owner), blocker=chain[0], blocked=chain[2])
    changeset = propose(
        member,
        project,
        {"op": "update", "item": "BAL-1", "base_version": chain[0].version, "fields": {"state": "done"}},
    )

    impact = changeset_impact(changeset=changeset)

    assert keys(impact.becomes_runnable) == ["BAL-2", "BAL-3"]
    assert keys(impact.unblocked) == ["BAL-2", "BAL-3"]
    assert impact.stops_runnable == ()
    assert impact.becomes_blocked == ()
    assert len(impact.chain_after) < len(impact.chain_before) == 2
    assert item_get(project=project, key="BAL-1").state == "in_progress"


def test_removing_a_dependency_unblocks_and_shortens_the_chain(project, member, chain):
    changeset = propose(member, project, {"op": "remove_dependency", "blocker": "BAL-1", "blocked": "BAL-2"})

    impact = changeset_impact(changeset=changeset)

    assert impact.unblocked == (ImpactTicket(key="BAL-2", title="API"),)
    assert keys(impact.becomes_runnable) == ["BAL-2"]
    assert keys(impact.chain_before) == ["BAL-1", "BAL-2"]
    assert impact.chain_after == ()
    assert Dependency.objects.filter(blocker=chain[0], blocked=chain[1]).exists()


def test_new_tickets_are_named_by_their_ref_and_marked_new(project, member, chain):
    changeset = propose(
        member,
        project,
        {
            "op": "create",
            "ref": "login",
            "kind": "ticket",
            "fields": {"title": "Login form", "state": "ready"},
        },
        {"op": "create", "ref": "audit", "kind": "ticket", "fields": {"title": "Audit", "state": "ready"}},
        {"op": "create", "kind": "ticket", "fields": {"title": "Loose end"}},
        {"op": "add_dependency", "blocker": "$login", "blocked": "$audit"},
        {"op": "add_dependency", "blocker": "$login", "blocked": "BAL-3"},
    )

    impact = changeset_impact(changeset=changeset)

    login = ImpactTicket(key="$login", title="Login form", new=True)
    assert impact.becomes_runnable == (login,)
    assert impact.stops_runnable == (ImpactTicket(key="BAL-3", title="Docs"),)
    assert impact.becomes_blocked == (
        ImpactTicket(key="BAL-3", title="Docs"),
        ImpactTicket(key="$audit", title="Audit", new=True),
    )
    assert impact.graph_after is not None
    new = {node.key: node for node in impact.graph_after.nodes if node.new}
    assert set(new) == {"$login", "$audit", "$#2"}
    assert new["$#2"].title == "Loose end"
    assert new["$#2"].state == "draft"
    assert {("$login", "$audit"), ("$login", "BAL-3"), ("BAL-1", "BAL-2")} == set(impact.graph_after.edges)
    assert not any(node.new for node in impact.graph_before.nodes)  # type: ignore[union-attr]
    assert Item.objects.count() == 3


def test_a_conflicting_changeset_has_no_impact_but_the_reason(project, member, owner, chain):
    version = chain[2].version
    changeset = propose(
        member,
        project,
        {"op": "add_dependency", "blocker": "BAL-2", "blocked": "BAL-3"},
        {"op": "update", "item": "BAL-3", "base_version": version, "fields": {"title": "Docs!"}},
    )
    item_update(actor=Actor(user=owner), item=chain[2], fields={"title": "Handbook"})

    impact = changeset_impact(changeset=changeset)

    assert impact == Impact(
        unavailable=(
            "This changeset no longer applies: operations[1].base_version: BAL-3 changed: "
            f"base_version {version} is stale, it is now at version {version + 1}."
        )
    )
    assert Changeset.objects.get(pk=changeset.pk).status == ChangesetStatus.PROPOSED


def test_a_decided_changeset_has_no_impact(project, member, maintainer, chain):
    changeset = propose(member, project, {"op": "add_dependency", "blocker": "BAL-2", "blocked": "BAL-3"})
    changeset = changeset_reject(actor=Actor(user=maintainer), changeset=changeset, note="No.")

    impact = changeset_impact(changeset=changeset)

    assert impact.unavailable == "Changeset #1 is rejected; only a proposed changeset has an impact."
    assert impact.graph_before is None


# --- nothing of the trial stays ----------------------------------------------------------------


def snapshot(project: Project) -> dict[str, Any]:
    """Everything a trial writes to, as it is now."""
    fresh = Project.objects.get(pk=project.pk)
    return {
        "items": list(Item.objects.order_by("pk").values_list("pk", "number", "title", "state", "version")),
        "dependencies": list(Dependency.objects.order_by("pk").values_list("blocker_id", "blocked_id")),
        "events": list(ActivityEvent.objects.order_by("seq").values_list("seq", "verb", "target")),
        "activity_seq": Organization.objects.get(pk=project.organization_id).activity_seq,
        "counters": (fresh.next_item_number, fresh.next_changeset_number),
        "changesets": list(
            Changeset.objects.values_list("status", "decided_by", "conflict_reason", "created_items")
        ),
    }


ALL_KINDS = (
    {"op": "create", "ref": "login", "kind": "ticket", "fields": {"title": "Login", "state": "ready"}},
    {"op": "add_dependency", "blocker": "$login", "blocked": "BAL-3"},
    {"op": "remove_dependency", "blocker": "BAL-1", "blocked": "BAL-2"},
    {"op": "update", "item": "BAL-1", "base_version": 1, "fields": {"state": "done", "title": "Schema v2"}},
)


@pytest.fixture
def told(monkeypatch) -> Iterator[list[str]]:
    """What would have left the trial: decisions sent, search indexing enqueued."""
    sent: list[str] = []

    def decided(sender: Any, **kwargs: Any) -> None:
        sent.append("changeset_decided")

    changeset_decided.connect(decided, dispatch_uid="test_impact")
    monkeypatch.setattr("tracker.tasks.search_index.delay", lambda *args: sent.append(f"index {args}"))
    yield sent
    changeset_decided.disconnect(dispatch_uid="test_impact")


def test_nothing_of_the_trial_stays(project, member, chain, told, django_capture_on_commit_callbacks):
    changeset = propose(member, project, *ALL_KINDS)
    before = snapshot(project)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        impact = changeset_impact(changeset=changeset)

    assert impact.unavailable == ""
    assert keys(impact.becomes_runnable) == ["BAL-2", "$login"]
    assert snapshot(project) == before
    assert callbacks == []
    assert told == []


@pytest.mark.django_db(transaction=True)
def test_nothing_stays_when_the_trial_is_the_whole_transaction(project, member, chain, told):
    changeset = propose(member, project, *ALL_KINDS)
    before = snapshot(project)

    impact = changeset_impact(changeset=changeset)

    assert keys(impact.unblocked) == ["BAL-2"]
    assert snapshot(project) == before
    assert told == []


@pytest.mark.django_db(transaction=True)
def test_inside_an_outer_transaction_only_the_trial_is_rolled_back(project, member, owner, chain, told):
    changeset = propose(member, project, *ALL_KINDS)
    before = snapshot(project)

    with transaction.atomic():
        impact = changeset_impact(changeset=changeset)
        assert snapshot(project) == before
        item_update(actor=Actor(user=owner), item=chain[2], fields={"title": "Handbook"})

    assert keys(impact.becomes_blocked) == ["BAL-3"]
    assert item_get(project=project, key="BAL-3").title == "Handbook"  # the outer work committed
    assert Item.objects.count() == 3
    assert [cs.status for cs in Changeset.objects.all()] == [ChangesetStatus.PROPOSED]
    assert told == ["index ('item', [" + str(chain[2].pk) + "])"]


def lockable(project: Project, item: Item) -> str:
    """Whether another connection may lock the rows a trial writes to right now, without waiting."""
    outcome: list[str] = []

    def take() -> None:
        try:
            with transaction.atomic():
                Organization.objects.select_for_update(nowait=True).get(pk=project.organization_id)
                Project.objects.select_for_update(nowait=True).get(pk=project.pk)
                Item.objects.select_for_update(nowait=True).get(pk=item.pk)
            outcome.append("free")
        except DatabaseError:
            outcome.append("locked")
        finally:
            connection.close()

    thread = threading.Thread(target=take)
    thread.start()
    thread.join(timeout=30)
    return outcome[0]


@pytest.mark.django_db(transaction=True)
def test_the_trials_row_locks_end_with_it_inside_an_outer_transaction(project, member, owner, chain):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no row locks: a writing transaction holds the whole database")
    changeset = propose(member, project, *ALL_KINDS)

    with transaction.atomic():
        changeset_impact(changeset=changeset)
        free_after_the_trial = lockable(project, chain[0])
        item_update(actor=Actor(user=owner), item=chain[0], fields={"title": "Held"})
        held_by_the_outer_write = lockable(project, chain[0])

    assert (free_after_the_trial, held_by_the_outer_write) == ("free", "locked")


def test_the_trial_reads_a_bounded_number_of_queries(project, member, owner, make_item, chain):
    changeset = propose(member, project, *ALL_KINDS)
    with CaptureQueriesContext(connection) as small:
        changeset_impact(changeset=changeset)
    for number in range(40):
        make_item(title=f"Filler {number}", state="ready")
    changeset = Changeset.objects.select_related("project", "proposed_by").get(pk=changeset.pk)

    with CaptureQueriesContext(connection) as large:
        impact = changeset_impact(changeset=changeset)

    assert impact.graph_after is not None
    assert len(impact.graph_after.nodes) == 44
    assert len(large.captured_queries) == len(small.captured_queries)


# --- over REST ----------------------------------------------------------------------------------


@pytest.fixture
def proposed(project, member, chain) -> Changeset:
    return propose(
        member,
        project,
        {"op": "create", "ref": "login", "kind": "ticket", "fields": {"title": "Login", "state": "ready"}},
        {"op": "add_dependency", "blocker": "BAL-2", "blocked": "BAL-3"},
    )


def test_owner_reads_the_impact(proposed, owner, client_for):
    response = client_for(owner).get(BAL + "changesets/1/impact/")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["number"] == 1
    assert body["status"] == "proposed"
    assert body["becomes_runnable"] == [{"key": "$login", "title": "Login", "new": True}]
    assert body["stops_runnable"] == [{"key": "BAL-3", "title": "Docs", "new": False}]
    assert body["becomes_blocked"] == [{"key": "BAL-3", "title": "Docs", "new": False}]
    assert body["unblocked"] == []
    assert body["longest_chain"] == {"before": ["BAL-1", "BAL-2"], "after": ["BAL-1", "BAL-2", "BAL-3"]}
    assert body["graph"]["before"]["edges"] == [["BAL-1", "BAL-2"]]
    assert sorted(body["graph"]["after"]["edges"]) == [["BAL-1", "BAL-2"], ["BAL-2", "BAL-3"]]
    login = body["graph"]["after"]["nodes"][-1]
    assert login == {
        "key": "$login",
        "title": "Login",
        "state": "ready",
        "runnable": True,
        "claimed_by": "",
        "new": True,
    }
    assert [node["key"] for node in body["graph"]["before"]["nodes"]] == ["BAL-1", "BAL-2", "BAL-3"]


def test_a_viewer_reads_the_impact(proposed, viewer, client_for):
    response = client_for(viewer).get(BAL + "changesets/1/impact/")

    assert response.status_code == 200, response.content
    assert response.json()["becomes_blocked"] == [{"key": "BAL-3", "title": "Docs", "new": False}]


def test_an_api_key_with_the_read_scope_reads_the_impact(proposed, viewer, api_client):
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_key(viewer, 'read')}")

    response = api_client.get(BAL + "changesets/1/impact/")

    assert response.status_code == 200, response.content
    assert response.json()["number"] == 1


def test_who_cannot_read_the_project_gets_404(proposed, org, users, client_for):
    neighbour = UserFactory(username="neighbour")
    MembershipFactory(project=ProjectFactory(organization=org, key="NXT"), user=neighbour, role=Role.OWNER)

    for user in (neighbour, users["stranger"]):
        response = client_for(user).get(BAL + "changesets/1/impact/")
        assert response.status_code == 404, response.content
    assert client_for(neighbour).get("/api/v1/projects/NXT/changesets/1/impact/").status_code == 404


@pytest.mark.parametrize("number", ["2", "0", "99999999999999999999999"])
def test_an_unknown_number_is_404(proposed, owner, client_for, number):
    response = client_for(owner).get(BAL + f"changesets/{number}/impact/")

    assert response.status_code == 404, response.content
    assert response.json()["error"]["code"] == "not_found"


def test_a_decided_changeset_answers_409_with_the_reason(proposed, maintainer, viewer, client_for):
    changeset_reject(actor=Actor(user=maintainer), changeset=proposed, note="Later.")

    response = client_for(viewer).get(BAL + "changesets/1/impact/")

    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["message"] == "Changeset #1 is rejected; only a proposed changeset has an impact."
    assert error["current"] == {"number": 1, "status": "rejected"}


def test_a_changeset_that_no_longer_applies_answers_409(proposed, owner, chain, client_for):
    dependency_add(actor=Actor(user=owner), blocker=chain[1], blocked=chain[2])

    response = client_for(owner).get(BAL + "changesets/1/impact/")

    assert response.status_code == 409, response.content
    assert response.json()["error"]["message"] == (
        "This changeset no longer applies: operations[1]: The dependency BAL-2 → BAL-3 already exists."
    )
