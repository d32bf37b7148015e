"""Claims and reports (docs/domain.md#work): a worker claims a runnable ticket for a lease, renews
it, reports on it, releases it, or its lease runs out; over REST, in the services, and by workers
racing for one ticket."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import DatabaseError
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.factories import make_key, make_membership, make_user
from tracker.errors import InvalidStateError, NotFoundError, PermissionDeniedError
from tracker.models import ActivityEvent, Claim, Item, Report, Role
from tracker.selectors import (
    claim_get,
    claim_list,
    claims_active_by_item,
    final_reports,
    reports_of,
    runnable_tickets,
)
from tracker.services import work
from tracker.services.activity import Actor
from tracker.services.items import dependency_add, item_update
from tracker.services.work import claim_release, claim_renew, claim_take, claims_expire, report_add
from tracker.work_tasks import expire_claims

pytestmark = pytest.mark.django_db

API = "/api/v1/projects/BAL/"


def bearer(key: str, scheme: str = "Bearer") -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {key}")
    return client


def refusal(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content
    return response.json()["error"]


@pytest.fixture
def ticket(make_item) -> Item:
    return make_item(title="Add the cache", state="ready")


def take(user: Any, item: Item) -> Claim:
    return claim_take(actor=Actor(user=user), project=item.project, item=item)


def lapse(claim: Claim, minutes: int = 1) -> None:
    """Move the claim's lease into the past, as if no heartbeat came."""
    past = timezone.now() - timedelta(minutes=minutes)
    Claim.objects.filter(pk=claim.pk).update(renewed_at=past - timedelta(minutes=30), expires_at=past)


def events(verb: str) -> list[ActivityEvent]:
    return list(ActivityEvent.objects.filter(verb=verb).order_by("seq"))


def state_of(item: Item) -> str:
    return Item.objects.get(pk=item.pk).state


# --- claim ------------------------------------------------------------------------------------


def test_a_claim_takes_a_runnable_ticket_for_the_lease(client_for, member, ticket):
    response = client_for(member).post(f"{API}items/{ticket.key}/claim/", format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["item"], body["item_title"], body["holder"], body["status"]) == (
        ticket.key,
        "Add the cache",
        "member",
        "active",
    )
    assert body["ended_at"] is None
    assert body["end_reason"] == ""
    claim = Claim.objects.get(pk=body["id"])
    assert claim.expires_at - claim.renewed_at == timedelta(minutes=30)
    item = Item.objects.get(pk=ticket.pk)
    assert (item.state, item.version) == ("in_progress", ticket.version + 1)
    [updated] = events("item.updated")
    assert updated.data["changes"] == {"state": ["ready", "in_progress"]}
    [taken] = events("claim.taken")
    assert (taken.actor, taken.on_behalf_of, taken.target) == ("user:member", member, ticket.key)
    assert taken.data == {"claim": claim.pk, "holder": "member", "expires_at": claim.expires_at.isoformat()}


def test_the_lease_is_the_projects_claim_minutes(project, member, ticket):
    project.settings = {"claim_minutes": 5}
    project.save(update_fields=["settings"])

    claim = take(member, ticket)

    assert claim.expires_at - claim.renewed_at == timedelta(minutes=5)


def test_a_claimed_ticket_is_no_longer_runnable(project, member, ticket, make_item):
    other = make_item(title="Other", state="ready")

    take(member, ticket)

    assert list(runnable_tickets(project=project)) == [other]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("draft", "BAL-1 is draft; only ready tickets whose blockers are done can be claimed."),
        ("in_review", "BAL-1 is in_review; only ready tickets whose blockers are done can be claimed."),
        ("epic", "BAL-1 is an epic; only ready tickets whose blockers are done can be claimed."),
        (
            "blocked",
            "BAL-1 is blocked by BAL-2 (in_progress); "
            "only ready tickets whose blockers are done can be claimed.",
        ),
    ],
)
def test_only_a_runnable_ticket_can_be_claimed(client_for, owner, member, make_item, setup, message):
    if setup == "epic":
        item = make_item(kind="epic", title="An epic")
    else:
        item = make_item(state="ready" if setup == "blocked" else setup)
    if setup == "blocked":
        blocker = make_item(title="Blocker", state="in_progress")
        make_item(title="Done blocker", state="done")
        dependency_add(actor=Actor(user=owner), blocker=blocker, blocked=item)

    error = refusal(client_for(member).post(f"{API}items/{item.key}/claim/"), 409)

    assert error == {"code": "invalid_state", "message": message}
    assert not Claim.objects.exists()
    assert state_of(item) == item.state


def test_a_ticket_whose_blockers_are_resolved_can_be_claimed(owner, member, ticket, make_item):
    for state in ("done", "cancelled"):
        dependency_add(actor=Actor(user=owner), blocker=make_item(state=state), blocked=ticket)

    assert take(member, ticket).status == "active"


def test_a_second_claim_is_refused_naming_the_holder(client_for, member, maintainer, ticket):
    claim = take(member, ticket)
    Claim.objects.filter(pk=claim.pk).update(
        expires_at=(claim.expires_at + timedelta(days=1)).replace(hour=12, minute=30)
    )

    error = refusal(client_for(maintainer).post(f"{API}items/{ticket.key}/claim/"), 409)

    assert error["code"] == "conflict"
    assert error["message"] == f"{ticket.key} is claimed by member until 12:30 UTC."
    assert error["current"]["holder"] == "member"
    assert list(Claim.objects.values_list("holder__username", "status")) == [("member", "active")]


def test_a_claim_whose_lease_ran_out_unswept_does_not_block(member, maintainer, ticket):
    stale = take(member, ticket)
    lapse(stale)

    claim = take(maintainer, ticket)

    stale.refresh_from_db()
    assert (stale.status, claim.status, claim.holder) == ("expired", "active", maintainer)
    assert stale.end_reason.startswith("the lease ran out at ")
    assert state_of(ticket) == "in_progress"
    assert [e.actor for e in events("claim.expired")] == ["ballet:lease"]


@pytest.mark.parametrize(("caller", "status"), [("viewer", 403), ("stranger", 404)])
def test_claiming_needs_tracker_write_in_the_project(client_for, users, ticket, caller, status):
    error = refusal(client_for(users[caller]).post(f"{API}items/{ticket.key}/claim/"), status)

    assert error["code"] == ("permission_denied" if status == 403 else "not_found")
    assert not Claim.objects.exists()


def test_a_member_of_another_project_cannot_claim_or_read_its_claims(
    client_for, other_project, ticket, member
):
    outsider = make_membership(
        project=other_project, user=make_user(username="outsider"), role=Role.OWNER
    ).user
    take(member, ticket)
    client = client_for(outsider)

    assert refusal(client.post(f"{API}items/{ticket.key}/claim/"), 404)["code"] == "not_found"
    assert refusal(client.get(f"{API}claims/"), 404)["code"] == "not_found"


def test_the_claim_service_checks_permissions_itself(viewer, ticket):
    with pytest.raises(PermissionDeniedError):
        take(viewer, ticket)


def test_an_unknown_item_or_a_body_is_refused(client_for, member, ticket):
    assert refusal(client_for(member).post(f"{API}items/BAL-99/claim/"), 404)["code"] == "not_found"
    error = refusal(client_for(member).post(f"{API}items/{ticket.key}/claim/", {"x": 1}, format="json"), 400)
    assert list(error["fields"]) == ["x"]


def test_api_keys_claim_with_the_work_scope_only(member, ticket):
    refused = refusal(bearer(make_key(member, "read", "plan")).post(f"{API}items/{ticket.key}/claim/"), 403)
    worker = bearer(make_key(member, "work"))

    assert refused["code"] == "missing_scope"
    assert "lacks the work scope" in refused["message"]
    claimed = worker.post(f"{API}items/{ticket.key}/claim/")
    assert claimed.status_code == 201
    assert "lacks the read scope" in refusal(worker.get(f"{API}claims/"), 403)["message"]


# --- heartbeat --------------------------------------------------------------------------------


def test_a_heartbeat_renews_the_lease_and_records_no_event(client_for, member, ticket):
    claim = take(member, ticket)
    before = timezone.now() - timedelta(minutes=10)
    Claim.objects.filter(pk=claim.pk).update(renewed_at=before, expires_at=before + timedelta(minutes=30))
    seen = ActivityEvent.objects.count()

    response = client_for(member).post(f"{API}claims/{claim.pk}/")

    assert response.status_code == 200, response.content
    claim.refresh_from_db()
    assert claim.renewed_at > before
    assert claim.expires_at == claim.renewed_at + timedelta(minutes=30)
    assert response.json()["expires_at"] == claim.expires_at.isoformat().replace("+00:00", "Z")
    assert ActivityEvent.objects.count() == seen


def test_only_the_holder_renews(client_for, member, maintainer, ticket):
    claim = take(member, ticket)

    error = refusal(client_for(maintainer).post(f"{API}claims/{claim.pk}/"), 403)

    assert error["message"] == "Only the claim's holder, member, renews it."


def test_an_ended_claim_is_not_renewed(member, ticket):
    claim = take(member, ticket)
    claim_release(actor=Actor(user=member), claim=claim)

    with pytest.raises(InvalidStateError, match="has ended \\(released"):
        claim_renew(actor=Actor(user=member), claim=claim)


def test_a_heartbeat_after_the_lease_ran_out_expires_the_claim_and_is_refused(client_for, member, ticket):
    claim = take(member, ticket)
    lapse(claim)

    error = refusal(client_for(member).post(f"{API}claims/{claim.pk}/"), 409)

    assert "has ended (expired: the lease ran out" in error["message"]
    claim.refresh_from_db()
    assert claim.status == "expired"
    assert state_of(ticket) == "ready"


# --- reports ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "policy", "claim_status", "state"),
    [
        ("progress", {}, "active", "in_progress"),
        ("done", {}, "done", "in_review"),
        ("done", {"review": "none"}, "done", "done"),
        ("blocked", {}, "blocked", "ready"),
        ("failed", {}, "failed", "ready"),
    ],
)
def test_each_report_kind_moves_the_claim_and_the_ticket(
    client_for, owner, member, ticket, kind, policy, claim_status, state
):
    if policy:
        ticket = item_update(actor=Actor(user=owner), item=ticket, fields={"policy": policy})
    claim = take(member, ticket)
    Claim.objects.filter(pk=claim.pk).update(expires_at=timezone.now() + timedelta(minutes=1))
    summary = "First line of it\n\n- **more** in Markdown  \n"
    body = {
        "kind": kind,
        "summary": summary,
        "links": ["https://ci.example.com/run/7"],
        "details": {"tests": 12},
    }

    response = client_for(member).post(f"{API}claims/{claim.pk}/reports/", body, format="json")

    assert response.status_code == 201, response.content
    data = response.json()
    assert (data["kind"], data["summary"], data["author"], data["item"], data["claim"]) == (
        kind,
        summary,
        "member",
        ticket.key,
        claim.pk,
    )
    assert (data["links"], data["details"]) == (body["links"], {"tests": 12})
    assert (data["claim_status"], data["item_state"]) == (claim_status, state)
    claim.refresh_from_db()
    assert claim.status == claim_status
    assert state_of(ticket) == state
    if kind == "progress":
        assert claim.expires_at > timezone.now() + timedelta(minutes=29)
        assert claim.ended_at is None
    else:
        assert claim.ended_at is not None
        assert claim.end_reason == "First line of it"
    [added] = events("report.added")
    assert added.actor == "user:member"
    assert added.data == {
        "claim": claim.pk,
        "kind": kind,
        "summary": summary,
        "links": body["links"],
        "state": None if kind == "progress" else state,
    }
    assert Report.objects.get().summary == summary  # verbatim


def test_a_done_report_leaves_a_ticket_a_human_moved_meanwhile(owner, member, ticket):
    claim = take(member, ticket)
    item_update(actor=Actor(user=owner), item=ticket, fields={"state": "cancelled"})

    report_add(actor=Actor(user=member), claim=claim, kind="done", summary="Done anyway.")

    assert state_of(ticket) == "cancelled"
    assert events("report.added")[0].data["state"] is None


def test_an_events_summary_is_cut_to_500_characters(member, ticket):
    claim = take(member, ticket)

    report_add(actor=Actor(user=member), claim=claim, kind="progress", summary="x" * 800)

    assert events("report.added")[0].data["summary"] == "x" * 500
    assert Report.objects.get().summary == "x" * 800


def test_only_the_holder_reports(client_for, member, maintainer, ticket):
    claim = take(member, ticket)

    response = client_for(maintainer).post(
        f"{API}claims/{claim.pk}/reports/", {"kind": "done", "summary": "Mine now."}, format="json"
    )

    assert refusal(response, 403)["message"] == "Only the claim's holder, member, reports on it."
    assert not Report.objects.exists()
    assert state_of(ticket) == "in_progress"


def test_a_report_on_an_ended_claim_is_refused(client_for, member, ticket):
    claim = take(member, ticket)
    report_add(actor=Actor(user=member), claim=claim, kind="failed", summary="Cannot build.")

    response = client_for(member).post(
        f"{API}claims/{claim.pk}/reports/", {"kind": "done", "summary": "Done after all."}, format="json"
    )

    error = refusal(response, 409)
    assert error["message"] == f"Claim {claim.pk} on {ticket.key} has ended (failed: Cannot build.)."
    assert Report.objects.count() == 1


GOOD = {"kind": "progress", "summary": "Halfway."}


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"summary": "x"}, ["kind"]),
        ({**GOOD, "kind": "finished"}, ["kind"]),
        ({"kind": "done"}, ["summary"]),
        ({**GOOD, "summary": " \n\t"}, ["summary"]),
        ({**GOOD, "summary": 7}, ["summary"]),
        ({**GOOD, "summary": "é" * 10_000 + "x"}, ["summary"]),  # 20,001 bytes
        ({**GOOD, "summary": "bad\x00"}, ["summary"]),
        ({**GOOD, "links": ["javascript:alert(1)"]}, ["links.0"]),
        ({**GOOD, "links": ["https://ok.example.com", "/relative/path"]}, ["links.1"]),
        ({**GOOD, "links": ["ftp://files.example.com/x"]}, ["links.0"]),
        ({**GOOD, "links": ["https://example.com/" + "a" * 2000]}, ["links.0"]),
        ({**GOOD, "links": [f"https://example.com/{n}" for n in range(21)]}, ["links"]),
        ({**GOOD, "links": "https://example.com"}, ["links"]),
        ({**GOOD, "links": [7]}, ["links.0"]),
        ({**GOOD, "details": ["not", "an", "object"]}, ["details"]),
        ({**GOOD, "details": {"log": "x" * 20_000}}, ["details"]),
        ({**GOOD, "details": {"k": "nul\x00"}}, ["details.k"]),
        ({**GOOD, "extra": 1}, ["extra"]),
        ({"kind": "finished", "summary": "", "links": ["javascript:x"]}, ["kind", "links.0", "summary"]),
    ],
)
def test_a_bad_report_is_a_field_error_and_changes_nothing(client_for, member, ticket, body, fields):
    claim = take(member, ticket)
    before = Claim.objects.values().get(pk=claim.pk)

    response = client_for(member).post(f"{API}claims/{claim.pk}/reports/", body, format="json")

    error = refusal(response, 400)
    assert sorted(error["fields"]) == fields, error
    assert not Report.objects.exists()
    assert Claim.objects.values().get(pk=claim.pk) == before


@pytest.mark.parametrize(
    ("fields", "errors"),
    [
        ({"kind": "done", "summary": "ok\x00"}, ["summary"]),
        ({"kind": "done", "summary": "ok", "links": ["https://a.example.com/\x00"]}, ["links.0"]),
        ({"kind": "done", "summary": "ok", "links": ("https://a.example.com",)}, ["links"]),
        ({"kind": "done", "summary": "ok", "details": {"x": {1, 2}}}, ["details"]),
        ({"kind": None, "summary": None}, ["kind", "summary"]),
    ],
)
def test_the_report_service_checks_its_input_itself(member, ticket, fields, errors):
    claim = take(member, ticket)

    with pytest.raises(work.ValidationError) as raised:
        report_add(actor=Actor(user=member), claim=claim, **fields)

    assert sorted(raised.value.errors) == errors


def test_a_summary_of_exactly_20000_bytes_and_20_links_are_accepted(member, ticket):
    claim = take(member, ticket)
    links = [f"http://example.com/{n}" for n in range(20)]

    report = report_add(
        actor=Actor(user=member), claim=claim, kind="progress", summary="é" * 10_000, links=links
    )

    assert (len(report.summary.encode()), report.links) == (20_000, links)


# --- release ----------------------------------------------------------------------------------


def test_the_holder_releases_with_a_reason(member, ticket):
    claim = take(member, ticket)
    client = bearer(make_key(member, "work"))

    response = client.post(f"{API}claims/{claim.pk}/release/", {"reason": "Wrong ticket."}, format="json")

    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["end_reason"]) == (
        "released",
        "released by its holder: Wrong ticket.",
    )
    assert state_of(ticket) == "ready"
    [released] = events("claim.released")
    assert released.data == {"claim": claim.pk, "holder": "member", "by": "member", "reason": "Wrong ticket."}
    assert events("item.updated")[-1].data["changes"] == {"state": ["in_progress", "ready"]}


@pytest.mark.parametrize("how", ["session", "legacy token"])
def test_a_human_with_tracker_write_releases_someone_elses_claim(client_for, member, maintainer, ticket, how):
    claim = take(member, ticket)
    client = (
        client_for(maintainer)
        if how == "session"
        else bearer(Token.objects.create(user=maintainer).key, "Token")
    )

    response = client.post(f"{API}claims/{claim.pk}/release/", {}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["end_reason"] == "released by maintainer"
    assert state_of(ticket) == "ready"
    assert events("claim.released")[0].data["by"] == "maintainer"


def test_an_api_key_does_not_release_someone_elses_claim(member, maintainer, ticket):
    claim = take(member, ticket)

    error = refusal(bearer(make_key(maintainer, "work")).post(f"{API}claims/{claim.pk}/release/"), 403)

    assert error["message"].startswith("Only the claim's holder, member, releases it with an API key")
    assert Claim.objects.get(pk=claim.pk).status == "active"


def test_a_viewer_does_not_release(client_for, member, viewer, ticket):
    claim = take(member, ticket)

    assert (
        refusal(client_for(viewer).post(f"{API}claims/{claim.pk}/release/"), 403)["code"]
        == "permission_denied"
    )
    with pytest.raises(PermissionDeniedError):
        claim_release(actor=Actor(user=viewer), claim=claim)
    assert Claim.objects.get(pk=claim.pk).status == "active"


def test_an_ended_claim_is_not_released_again(client_for, member, ticket):
    claim = take(member, ticket)
    claim_release(actor=Actor(user=member), claim=claim)

    assert (
        refusal(client_for(member).post(f"{API}claims/{claim.pk}/release/"), 409)["code"] == "invalid_state"
    )


def test_a_release_leaves_a_ticket_a_human_moved_meanwhile(owner, member, ticket):
    claim = take(member, ticket)
    item_update(actor=Actor(user=owner), item=ticket, fields={"state": "in_review"})

    claim_release(actor=Actor(user=member), claim=claim, reason="")

    assert state_of(ticket) == "in_review"


# --- expiry -----------------------------------------------------------------------------------


def test_claims_expire_ends_the_claims_whose_lease_ran_out(member, maintainer, ticket, make_item):
    other = make_item(title="Still held", state="ready")
    due = take(member, ticket)
    held = take(maintainer, other)
    at = timezone.now().replace(hour=9, minute=15, second=0, microsecond=0) - timedelta(days=1)
    Claim.objects.filter(pk=due.pk).update(renewed_at=at - timedelta(minutes=30), expires_at=at)

    assert claims_expire() == 1

    due.refresh_from_db()
    assert due.status == "expired"
    assert due.end_reason == "the lease ran out at 09:15 UTC (no heartbeat or report for 30 minutes)"
    assert due.ended_at is not None
    assert Claim.objects.get(pk=held.pk).status == "active"
    assert (state_of(ticket), state_of(other)) == ("ready", "in_progress")
    [expired] = events("claim.expired")
    assert (expired.actor, expired.on_behalf_of, expired.target) == ("ballet:lease", member, ticket.key)
    assert expired.data == {"claim": due.pk, "holder": "member", "reason": due.end_reason}
    assert events("item.updated")[-1].actor == "ballet:lease"
    assert claims_expire() == 0


def test_claims_expire_takes_the_time_it_is_given(member, ticket):
    claim = take(member, ticket)

    assert claims_expire(now=claim.expires_at - timedelta(seconds=1)) == 0
    assert claims_expire(now=claim.expires_at + timedelta(seconds=1)) == 1


def test_a_claim_renewed_while_the_sweep_runs_is_not_expired(monkeypatch, member, ticket):
    claim = take(member, ticket)
    lapse(claim)
    listed = work._due_claim_ids

    def listed_then_renewed(now: Any) -> list[int]:
        ids = listed(now)  # the sweep saw the lease run out ...
        Claim.objects.filter(pk=claim.pk).update(
            expires_at=timezone.now() + timedelta(minutes=30)
        )  # ... a heartbeat
        return ids

    monkeypatch.setattr(work, "_due_claim_ids", listed_then_renewed)

    assert claims_expire() == 0
    assert Claim.objects.get(pk=claim.pk).status == "active"
    assert state_of(ticket) == "in_progress"
    assert not events("claim.expired")


def test_the_celery_task_sweeps_and_beat_runs_it_every_30_seconds(settings, member, ticket):
    lapse(take(member, ticket))

    expire_claims.delay()

    assert Claim.objects.get().status == "expired"
    assert {"task": "tracker.expire_claims", "schedule": 30.0} in settings.CELERY_BEAT_SCHEDULE.values()
    assert "tracker.work_tasks" in settings.CELERY_IMPORTS


def test_the_actor_of_an_expiry_is_ballet_on_behalf_of_the_holder(member):
    assert Actor(user=member).label == "user:member"
    assert Actor(user=member, system="lease").label == "ballet:lease"


# --- reads ------------------------------------------------------------------------------------


def test_claims_are_listed_newest_first_and_filtered(client_for, member, viewer, ticket, make_item):
    first = take(member, ticket)
    report_add(actor=Actor(user=member), claim=first, kind="done", summary="Done.")
    second = take(member, make_item(title="Second", state="ready"))
    client = client_for(viewer)

    every = client.get(f"{API}claims/").json()
    active = client.get(f"{API}claims/?active=true").json()
    ended = client.get(f"{API}claims/?active=false").json()

    assert [row["id"] for row in every["results"]] == [second.pk, first.pk]
    assert [row["id"] for row in active["results"]] == [second.pk]
    assert [row["id"] for row in ended["results"]] == [first.pk]
    assert "reports" not in every["results"][0]
    assert list(refusal(client.get(f"{API}claims/?active=maybe"), 400)["fields"]) == ["active"]


def test_a_claim_reads_with_its_reports(client_for, member, viewer, ticket):
    claim = take(member, ticket)
    report_add(actor=Actor(user=member), claim=claim, kind="progress", summary="One.")
    report_add(
        actor=Actor(user=member), claim=claim, kind="done", summary="Two.", links=["https://x.example"]
    )
    client = bearer(make_key(viewer, "read"))

    detail = client.get(f"{API}claims/{claim.pk}/").json()
    reports = client.get(f"{API}claims/{claim.pk}/reports/").json()

    assert (detail["status"], detail["item"], detail["holder"]) == ("done", ticket.key, "member")
    assert [(r["kind"], r["summary"]) for r in detail["reports"]] == [("progress", "One."), ("done", "Two.")]
    assert [r["summary"] for r in reports["results"]] == ["One.", "Two."]
    assert reports["results"][1]["links"] == ["https://x.example"]


@pytest.mark.parametrize("claim_id", ["abc", "0", "-1", "99999", "1.5", "٣", str(2**63)])
def test_an_unknown_or_garbage_claim_id_is_not_found(client_for, member, ticket, claim_id):
    take(member, ticket)

    error = refusal(client_for(member).get(f"{API}claims/{claim_id}/"), 404)

    assert error["message"] == f"Claim {claim_id} not found."


def test_another_projects_claim_is_not_found(project, other_project, member, ticket):
    claim = take(member, ticket)

    with pytest.raises(NotFoundError, match=f"Claim {claim.pk} not found."):
        claim_get(project=other_project, claim_id=claim.pk)
    assert claim_get(project=project, claim_id=str(claim.pk)) == claim
    with pytest.raises(NotFoundError):
        claim_get(project=project, claim_id=None)


def test_the_selectors_read_in_one_query(
    django_assert_num_queries, project, member, maintainer, ticket, make_item
):
    other = make_item(title="Other", state="ready")
    idle = make_item(title="Idle", state="ready")
    done = take(member, ticket)
    report_add(actor=Actor(user=member), claim=done, kind="done", summary="Old.")
    item_update(actor=Actor(user=member), item=Item.objects.get(pk=ticket.pk), fields={"state": "ready"})
    again = take(maintainer, ticket)
    report_add(actor=Actor(user=maintainer), claim=again, kind="done", summary="Newer.")
    held = take(member, other)

    with django_assert_num_queries(1):
        active = claims_active_by_item(item_ids=[ticket.pk, other.pk, idle.pk])
        assert {item_id: (c.pk, c.holder.username, c.item.key) for item_id, c in active.items()} == {
            other.pk: (held.pk, "member", other.key)
        }
    with django_assert_num_queries(1):
        final = final_reports(item_ids=[ticket.pk, other.pk, idle.pk])
        assert {item_id: (r.summary, r.author.username) for item_id, r in final.items()} == {
            ticket.pk: ("Newer.", "maintainer")
        }
    assert [r.summary for r in reports_of(claim=done)] == ["Old."]
    assert list(claim_list(project=project, active=True)) == [held]
    assert claims_active_by_item(item_ids=[]) == final_reports(item_ids=[]) == {}


# --- metrics ----------------------------------------------------------------------------------


def test_metrics_count_claims_by_status_and_reports_by_kind(client, member, ticket, make_item):
    claim = take(member, ticket)
    report_add(actor=Actor(user=member), claim=claim, kind="progress", summary="One.")
    report_add(actor=Actor(user=member), claim=claim, kind="blocked", summary="Two.")
    take(member, make_item(title="Held", state="ready"))

    text = client.get("/metrics").content.decode()

    assert 'ballet_claims{status="active"} 1.0' in text
    assert 'ballet_claims{status="blocked"} 1.0' in text
    assert 'ballet_claims{status="expired"} 0.0' in text
    assert 'ballet_reports{kind="progress"} 1.0' in text
    assert 'ballet_reports{kind="done"} 0.0' in text


def test_a_database_outage_leaves_the_rest_of_the_scrape(client, monkeypatch):
    def down(*args: Any, **kwargs: Any) -> Any:
        raise DatabaseError("the database is down")

    monkeypatch.setattr(Claim.objects, "values_list", down)

    response = client.get("/metrics")

    assert response.status_code == 200
    text = response.content.decode()
    assert "ballet_claims" not in text
    assert "ballet_questions{" in text


# --- admin ------------------------------------------------------------------------------------

CLAIMS_ADMIN = "/admin/tracker/claim/"


def release_in_admin(client: Any, claim: Claim) -> Any:
    data = {"action": "release", "_selected_action": [claim.pk], "index": 0}
    return client.post(CLAIMS_ADMIN, data, follow=True)


def test_the_admin_lists_claims_with_their_reports_read_only(client, staff, ticket):
    claim = take(staff["member"], ticket)
    summary = "Halfway <b>there</b>."
    report_add(actor=Actor(user=staff["member"]), claim=claim, kind="progress", summary=summary)
    client.force_login(staff["viewer"])

    listed = client.get(CLAIMS_ADMIN).content.decode()
    page = client.get(f"{CLAIMS_ADMIN}{claim.pk}/change/")

    assert ticket.title in listed
    assert page.status_code == 200
    content = page.content.decode()
    assert "Halfway &lt;b&gt;there&lt;/b&gt;." in content
    assert 'name="_save"' not in content
    assert client.post(f"{CLAIMS_ADMIN}add/").status_code == 403


def test_the_admin_hides_the_claims_of_projects_the_user_cannot_read(client, staff, ticket):
    claim = take(staff["member"], ticket)
    client.force_login(staff["stranger"])

    assert client.get(f"{CLAIMS_ADMIN}{claim.pk}/change/").status_code in (403, 404)
    assert ticket.title not in client.get(CLAIMS_ADMIN).content.decode()


def test_a_maintainer_releases_a_claim_in_the_admin(client, staff, ticket):
    claim = take(staff["member"], ticket)
    client.force_login(staff["maintainer"])

    response = release_in_admin(client, claim)

    assert f"Released the claims on {ticket.key}." in response.content.decode()
    claim.refresh_from_db()
    assert (claim.status, claim.end_reason) == ("released", "released by maintainer: released in the admin")
    assert state_of(ticket) == "ready"
    assert events("claim.released")[0].data["by"] == "maintainer"


def test_a_viewer_is_not_offered_the_release_in_the_admin(client, staff, ticket):
    claim = take(staff["member"], ticket)
    client.force_login(staff["viewer"])

    assert 'value="release"' not in client.get(CLAIMS_ADMIN).content.decode()
    release_in_admin(client, claim)

    assert Claim.objects.get(pk=claim.pk).status == "active"


def test_a_ticket_set_back_to_ready_while_its_claim_holds_is_not_runnable(project, make_item, member, owner):
    ticket = make_item(title="Held", state="ready")
    claim_take(actor=Actor(user=member), project=project, item=ticket)
    ticket.refresh_from_db()
    item_update(actor=Actor(user=owner), item=ticket, fields={"state": "ready"}, base_version=ticket.version)

    assert list(runnable_tickets(project=project)) == []
