"""Committed means answered (docs/operations.md#a-redis-outage): with Celery's broker out of reach,
every REST write of the work (claim, heartbeat, reports, release) and those that index (a changeset
applied, a skill, a knowledge entry) answers 2xx with its write done once. Their search indexing,
queued on commit, fails and is logged by name; before, the logging itself raised out of the commit
and a committed write answered 500."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from knowledge.models import KnowledgeEntry
from tests.factories import make_key
from tests.fakes.celery_broker import broker_down, broker_hung
from tracker.models import Changeset, Claim, Item, Report, Skill

pytestmark = pytest.mark.django_db(transaction=True)  # the hooks run when a write really commits

API = "/api/v1/projects/BAL/"


def caller(*, key: str | None = None, user: Any = None) -> APIClient:
    """A client that gets the 500 a real client would, instead of the view's exception."""
    client = APIClient(raise_request_exception=False)
    if key is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    if user is not None:
        client.force_authenticate(user)
    return client


def answered(response: Any) -> tuple[int, Any]:
    """The status and what the body says it is (a claim's status, a report's kind, a name), or the
    error."""
    body = response.json()
    return response.status_code, body.get("status") or body.get("kind") or body.get("name") or body


def test_a_worker_s_writes_over_rest_answer_with_the_write_while_the_broker_is_down(
    member, make_item, caplog
):
    tickets = [make_item(title=f"Ticket {n}", state="ready") for n in range(4)]
    worker = caller(key=make_key(member, "read", "work"))

    def claim(ticket: Item) -> tuple[tuple[int, Any], Any]:
        response = worker.post(f"{API}items/{ticket.key}/claim/", format="json")
        return answered(response), response.json().get("id")

    def report(claim_id: Any, kind: str) -> tuple[int, Any]:
        body = {"kind": kind, "summary": f"A {kind} report"}
        return answered(worker.post(f"{API}claims/{claim_id}/reports/", body, format="json"))

    with broker_down():
        seen: dict[str, Any] = {}
        seen["claim"], first = claim(tickets[0])
        seen["heartbeat"] = answered(worker.post(f"{API}claims/{first}/", format="json"))
        seen["progress"] = report(first, "progress")
        seen["done"] = report(first, "done")
        for ticket, kind in zip(tickets[1:3], ("blocked", "failed"), strict=True):
            seen[f"claim for {kind}"], claim_id = claim(ticket)
            seen[kind] = report(claim_id, kind)
        seen["claim to release"], last = claim(tickets[3])
        release = worker.post(f"{API}claims/{last}/release/", {"reason": "Not mine"}, format="json")
        seen["release"] = answered(release)

    written = {
        "claims": sorted(Claim.objects.values_list("item__number", "status")),
        "reports": sorted(Report.objects.values_list("item__number", "kind")),
        "tickets": sorted(Item.objects.values_list("number", "state")),
    }
    # Each write that moved a ticket queued its indexing, which failed and was logged by name.
    failed = [r.getMessage() for r in caplog.records if "in on_commit()" in r.getMessage()]
    assert (seen, written, len(failed)) == (
        {
            "claim": (201, "active"),
            "heartbeat": (200, "active"),
            "progress": (201, "progress"),
            "done": (201, "done"),
            "claim for blocked": (201, "active"),
            "blocked": (201, "blocked"),
            "claim for failed": (201, "active"),
            "failed": (201, "failed"),
            "claim to release": (201, "active"),
            "release": (200, "released"),
        },
        {
            "claims": [(1, "done"), (2, "blocked"), (3, "failed"), (4, "released")],
            "reports": [(1, "done"), (1, "progress"), (2, "blocked"), (3, "failed")],
            "tickets": [(1, "in_review"), (2, "ready"), (3, "ready"), (4, "ready")],
        },
        8,
    )
    assert all("tracker.tasks.search_index_enqueue" in message for message in failed)


def test_rest_writes_that_index_answer_with_the_write_while_the_broker_is_down(member, maintainer):
    operations = [{"op": "create", "ref": "login", "kind": "ticket", "fields": {"title": "Login"}}]
    proposer, decider = caller(user=member), caller(user=maintainer)
    for title in ("Applied", "Rejected"):
        body = {"title": title, "rationale": "Why", "operations": operations}
        assert proposer.post(f"{API}changesets/", body, format="json").status_code == 201

    with broker_down():
        entry = {"kind": "decision", "title": "Use SQLite", "body": "Why", "projects": ["BAL"]}
        seen = {
            "apply": answered(decider.post(f"{API}changesets/1/apply/", format="json")),
            "reject": answered(decider.post(f"{API}changesets/2/reject/", {"note": "No"}, format="json")),
            "skill": answered(
                decider.post(f"{API}skills/", {"name": "style", "body": "# Style"}, format="json")
            ),
            "knowledge": answered(proposer.post("/api/v1/knowledge/", entry, format="json")),
        }

    written = {
        "changesets": sorted(Changeset.objects.values_list("number", "status")),
        "items": list(Item.objects.values_list("number", "title")),
        "skills": list(Skill.objects.values_list("name", flat=True)),
        "knowledge": list(KnowledgeEntry.objects.values_list("title", flat=True)),
    }
    assert (seen, written) == (
        {
            "apply": (200, "applied"),
            "reject": (200, "rejected"),
            "skill": (201, "style"),
            "knowledge": (201, "decision"),
        },
        {
            "changesets": [(1, "applied"), (2, "rejected")],
            "items": [(1, "Login")],
            "skills": ["style"],
            "knowledge": ["Use SQLite"],
        },
    )


ANSWER_SECONDS = 15  # a write answers within this while the broker hangs (its publish gives up)


def test_a_claim_answers_within_seconds_with_the_write_while_the_broker_hangs(member, make_item):
    """Without socket timeouts on the broker's connections the publish after the commit waited for
    ever, and so did the committed claim's answer (the client's retry would meet its own write)."""
    ticket = make_item(title="Add the cache", state="ready")
    worker = caller(key=make_key(member, "work"))
    answers: list[tuple[tuple[int, Any], bool]] = []

    def claim() -> None:
        answer = answered(worker.post(f"{API}items/{ticket.key}/claim/"))
        answers.append((answer, time.monotonic() - started < ANSWER_SECONDS))

    started = time.monotonic()
    claiming = threading.Thread(target=claim, daemon=True)
    with broker_hung():
        claiming.start()
        claiming.join(ANSWER_SECONDS)
    claiming.join(ANSWER_SECONDS)  # the broker is closed: a claim still waiting on it goes on now

    assert (answers, Claim.objects.filter(item=ticket).count()) == ([((201, "active"), True)], 1)
