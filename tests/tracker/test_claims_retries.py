"""Safe retries of a worker's day (docs/agents.md#a-workers-day): claiming again a ticket one holds
returns the claim, renewed; a report sent again with its idempotency key returns the first one,
even once the claim has ended. A worker whose network drops after every call retries every step
and ends with one claim, one done report and the ticket in review."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.factories import make_key
from tracker.models import ActivityEvent, Claim, Item, Report

pytestmark = pytest.mark.django_db

API = "/api/v1/projects/BAL/"


@pytest.fixture
def ticket(make_item) -> Item:
    return make_item(title="Add the cache", state="ready")


@pytest.fixture
def worker(member) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_key(member, 'read', 'work')}")
    return client


def report(client: APIClient, claim_id: int, body: dict[str, Any], key_header: str | None = None) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key_header} if key_header else {}
    return client.post(f"{API}claims/{claim_id}/reports/", body, format="json", **headers)  # type: ignore[arg-type]


def test_claiming_again_a_ticket_one_holds_returns_the_claim_renewed(worker, client_for, maintainer, ticket):
    first = worker.post(f"{API}items/{ticket.key}/claim/")
    again = worker.post(f"{API}items/{ticket.key}/claim/")
    other = client_for(maintainer).post(f"{API}items/{ticket.key}/claim/")

    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["expires_at"] >= first.json()["expires_at"]
    assert other.status_code == 409  # anyone else is still refused, naming the holder
    assert "claimed by member" in other.json()["error"]["message"]
    assert Claim.objects.count() == 1
    assert ActivityEvent.objects.filter(verb="claim.taken").count() == 1  # a retry records nothing


def test_a_worker_whose_network_drops_after_every_call_ends_with_one_claim_and_one_done_report(
    worker, ticket
):
    """Every call is sent twice: the first answer was lost."""
    claims = [worker.post(f"{API}items/{ticket.key}/claim/") for _ in range(2)]
    claim_id = claims[0].json()["id"]
    progress = [
        report(worker, claim_id, {"kind": "progress", "summary": "Half way.", "idempotency_key": "p-1"})
        for _ in range(2)
    ]
    done = [
        report(worker, claim_id, {"kind": "done", "summary": "Shipped."}, key_header="d-1") for _ in range(2)
    ]

    assert [r.status_code for r in claims + progress + done] == [201, 200, 201, 200, 201, 200]
    assert progress[1].json()["id"] == progress[0].json()["id"]
    assert done[1].json() == done[0].json()  # the first report, as the claim stands now: ended
    assert done[1].json()["claim_status"] == "done"
    assert Claim.objects.count() == 1
    assert list(Report.objects.order_by("pk").values_list("kind", "idempotency_key")) == [
        ("progress", "p-1"),
        ("done", "d-1"),
    ]
    ticket.refresh_from_db()
    assert ticket.state == "in_review"
    assert ActivityEvent.objects.filter(verb="report.added").count() == 2


def test_a_key_sent_with_another_report_is_refused_and_stores_nothing(worker, ticket):
    claim_id = worker.post(f"{API}items/{ticket.key}/claim/").json()["id"]
    report(worker, claim_id, {"kind": "progress", "summary": "Half way.", "idempotency_key": "k"})

    other = report(worker, claim_id, {"kind": "progress", "summary": "Further.", "idempotency_key": "k"})

    assert other.status_code == 409
    assert "The idempotency key was used for another report on claim" in other.json()["error"]["message"]
    assert Report.objects.count() == 1


@pytest.mark.parametrize("key", ["ключ", "x" * 201, "tab\tin"])
def test_a_bad_idempotency_key_is_a_field_error(worker, ticket, key):
    claim_id = worker.post(f"{API}items/{ticket.key}/claim/").json()["id"]

    refused = report(worker, claim_id, {"kind": "progress", "summary": "Half way.", "idempotency_key": key})

    assert refused.status_code == 400
    assert "idempotency_key" in refused.json()["error"]["fields"]
    assert Report.objects.count() == 0


def test_without_a_key_a_report_on_an_ended_claim_is_still_refused(worker, ticket):
    claim_id = worker.post(f"{API}items/{ticket.key}/claim/").json()["id"]
    report(worker, claim_id, {"kind": "done", "summary": "Shipped."})

    again = report(worker, claim_id, {"kind": "done", "summary": "Shipped."})

    assert again.status_code == 409
    assert Report.objects.count() == 1


def test_another_workers_key_replays_nothing_of_yours(worker, client_for, maintainer, ticket):
    claim_id = worker.post(f"{API}items/{ticket.key}/claim/").json()["id"]
    report(worker, claim_id, {"kind": "progress", "summary": "Half way.", "idempotency_key": "k"})

    stranger = report(
        client_for(maintainer), claim_id, {"kind": "progress", "summary": "Half way.", "idempotency_key": "k"}
    )

    assert stranger.status_code == 403  # only the holder reports, retried or not
    assert Report.objects.count() == 1
