"""A claim whose lease ran out holds nothing, whether or not the sweep has ended it (docs/domain.md#work):
every read of the tracker counts it as expired (runnable lists, claims, the plan and ticket pages,
the graph, the admin), claiming its ticket works end to end, and once swept it reads the same.
No sweep runs here: each lease is moved into the past with an update, as if no heartbeat came."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from pytest_django.asserts import assertContains, assertNotContains

from tracker.graph.plan_graph import project_graph
from tracker.models import Claim, Item
from tracker.selectors import claim_list, claims_active_by_item, runnable_tickets
from tracker.services.activity import Actor
from tracker.services.items import dependency_add, item_update
from tracker.services.work import claim_take, claims_expire

pytestmark = pytest.mark.django_db

API = "/api/v1/projects/BAL/"


@pytest.fixture
def ticket(make_item) -> Item:
    return make_item(title="Add the cache", state="ready")


def lapse(claim: Claim, minutes: int = 1) -> None:
    """Move the claim's lease into the past, as if no heartbeat came; nothing sweeps it."""
    past = timezone.now() - timedelta(minutes=minutes)
    Claim.objects.filter(pk=claim.pk).update(renewed_at=past - timedelta(minutes=30), expires_at=past)


@pytest.fixture
def lapsed(member, ticket) -> Claim:
    """``member``'s claim on the ticket, its lease run out a minute ago, not swept."""
    claim = claim_take(actor=Actor(user=member), project=ticket.project, item=ticket)
    lapse(claim)
    return Claim.objects.get(pk=claim.pk)


def unswept(claim: Claim) -> None:
    """The reads wrote nothing: the claim is still active, its ticket still in progress."""
    claim.refresh_from_db()
    assert claim.status == "active"
    assert Item.objects.get(pk=claim.item_id).state == "in_progress"


def keys(rows: list[dict[str, Any]]) -> list[str]:
    return [row["key"] for row in rows]


# --- runnable ---------------------------------------------------------------------------------


def test_a_ticket_whose_claim_lapsed_is_runnable_over_rest(client_for, viewer, ticket, lapsed):
    listed = client_for(viewer).get(f"{API}runnable/").json()["results"]

    assert keys(listed) == [ticket.key]
    assert [item.key for item in runnable_tickets(project=ticket.project)] == [ticket.key]
    unswept(lapsed)


def test_a_ticket_whose_claim_lapsed_still_waits_for_its_blockers(project, owner, make_item, ticket, lapsed):
    blocker = make_item(title="Schema", state="ready")
    dependency_add(actor=Actor(user=owner), blocker=blocker, blocked=Item.objects.get(pk=ticket.pk))

    assert [item.key for item in runnable_tickets(project=project)] == [blocker.key]


def test_a_ticket_in_progress_without_a_claim_is_not_runnable(project, make_item):
    make_item(title="Moved by hand", state="in_progress")

    assert list(runnable_tickets(project=project)) == []


def test_a_ticket_set_back_to_ready_whose_claim_lapsed_is_runnable(project, owner, member, ticket):
    claim = claim_take(actor=Actor(user=member), project=project, item=ticket)
    item_update(actor=Actor(user=owner), item=Item.objects.get(pk=ticket.pk), fields={"state": "ready"})
    assert list(runnable_tickets(project=project)) == []  # its claim still holds

    lapse(claim)

    assert [item.key for item in runnable_tickets(project=project)] == [ticket.key]


def test_the_runnable_ticket_of_a_lapsed_claim_is_claimed_over_rest(client_for, maintainer, ticket, lapsed):
    client = client_for(maintainer)
    listed = client.get(f"{API}runnable/").json()["results"]

    taken = client.post(f"{API}items/{keys(listed)[0]}/claim/")

    assert taken.status_code == 201, taken.content
    assert (taken.json()["item"], taken.json()["holder"]) == (ticket.key, "maintainer")
    old = client.get(f"{API}claims/{lapsed.pk}/").json()
    assert (old["status"], old["ended_at"]) == ("expired", old["expires_at"])
    assert old["expires_at"].startswith(lapsed.expires_at.strftime("%Y-%m-%dT%H:%M:%S"))
    assert Item.objects.get(pk=ticket.pk).state == "in_progress"
    assert client.get(f"{API}runnable/").json()["results"] == []


# --- claims -----------------------------------------------------------------------------------


def test_a_lapsed_claim_reads_as_expired_over_rest(client_for, viewer, ticket, lapsed):
    client = client_for(viewer)

    detail = client.get(f"{API}claims/{lapsed.pk}/").json()
    every = client.get(f"{API}claims/").json()["results"]
    active = client.get(f"{API}claims/?active=true").json()["results"]
    ended = client.get(f"{API}claims/?active=false").json()["results"]

    assert detail["status"] == "expired"
    assert detail["end_reason"] == (
        f"the lease ran out at {lapsed.expires_at:%H:%M} UTC (no heartbeat or report for 30 minutes)"
    )
    assert detail["ended_at"] == detail["expires_at"]
    assert [(c["id"], c["status"]) for c in every] == [(lapsed.pk, "expired")]
    assert active == []
    assert [c["id"] for c in ended] == [lapsed.pk]
    unswept(lapsed)


def test_a_lapsed_claim_reads_the_same_before_and_after_the_sweep(client_for, viewer, lapsed):
    client = client_for(viewer)
    before = client.get(f"{API}claims/{lapsed.pk}/").json()

    assert claims_expire() == 1

    assert client.get(f"{API}claims/{lapsed.pk}/").json() == before


def test_the_claim_selectors_leave_a_lapsed_claim_out(project, member, make_item, ticket, lapsed):
    other = make_item(title="Held", state="ready")
    held = claim_take(actor=Actor(user=member), project=project, item=other)

    assert claims_active_by_item(item_ids=[ticket.pk, other.pk]) == {other.pk: held}
    assert list(claim_list(project=project, active=True)) == [held]
    assert list(claim_list(project=project, active=False)) == [lapsed]


def test_releasing_a_lapsed_claim_expires_it_and_is_refused(client_for, member, ticket, lapsed):
    url = f"{API}claims/{lapsed.pk}/release/"

    response = client_for(member).post(url, {"reason": "done for"}, format="json")

    assert response.status_code == 409
    assert response.json()["error"]["message"].startswith(
        f"Claim {lapsed.pk} on {ticket.key} has ended (expired: the lease ran out at "
    )
    lapsed.refresh_from_db()
    assert (lapsed.status, Item.objects.get(pk=ticket.pk).state) == ("expired", "ready")


# --- the plan, the ticket, the graph, the admin -----------------------------------------------


def test_the_plan_page_shows_a_lapsed_claims_ticket_runnable_and_held_by_nobody(
    client: Client, viewer, ticket, lapsed
):
    client.force_login(viewer)

    response = client.get("/projects/BAL/?runnable=1")

    assertContains(response, 'Runnable now <span class="count">1</span>')
    assertContains(response, f'<span class="key">{ticket.key}</span>')
    assertContains(response, "No ticket is claimed.")
    assertNotContains(response, "held by")
    unswept(lapsed)


def test_the_ticket_page_shows_no_holder_for_a_lapsed_claim(client: Client, viewer, ticket, lapsed):
    client.force_login(viewer)

    response = client.get(f"/projects/BAL/items/{ticket.key}/")

    assert response.status_code == 200
    assertNotContains(response, "held by")
    assertNotContains(response, "Claimed by")


def test_the_graph_draws_a_lapsed_claims_ticket_runnable_and_unclaimed(project, ticket, lapsed):
    [node] = project_graph(project=project).nodes

    assert (node.key, node.runnable, node.claimed_by) == (ticket.key, True, "")


def test_the_admin_shows_a_lapsed_claim_as_expired(client: Client, superuser, lapsed):
    client.force_login(superuser)

    listing = client.get("/admin/tracker/claim/")
    detail = client.get(f"/admin/tracker/claim/{lapsed.pk}/change/")

    assertContains(listing, "expired (its lease ran out; not swept yet)")
    assertContains(detail, "expired (its lease ran out; not swept yet)")
