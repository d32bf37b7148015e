"""A ticket's brief over REST: everything a worker needs in one call, as the caller may read it, in a
number of queries that does not grow with the project."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from knowledge.services import knowledge_create
from planner.models import Question, QuestionStatus
from tests.factories import make_key, make_membership, make_project
from tracker.models import Claim, ClaimStatus, Report, Role
from tracker.services.activity import Actor
from tracker.services.items import dependency_add
from tracker.services.skills import skill_version_create

pytestmark = pytest.mark.django_db


def _url(key: str, item_key: str) -> str:
    return f"/api/v1/projects/{key}/items/{item_key}/brief/"


def _report(claim: Claim, kind: str, summary: str, links: list[str] | None = None) -> Report:
    return Report.objects.create(
        claim=claim, item=claim.item, author=claim.holder, kind=kind, summary=summary, links=links or []
    )


def _claim(item, holder, status=ClaimStatus.ACTIVE) -> Claim:
    now = timezone.now()
    return Claim.objects.create(
        project=item.project,
        item=item,
        holder=holder,
        status=status,
        renewed_at=now,
        expires_at=now + timedelta(minutes=30),
        ended_at=None if status == ClaimStatus.ACTIVE else now,
    )


@pytest.fixture
def plan(project, make_item, owner, member, maintainer):
    """A ticket under an epic and a milestone, blocked by a done ticket with a final report, and
    knowledge on the ticket, on its epic and elsewhere."""
    milestone = make_item(kind="milestone", title="Beta", state="open")
    epic = make_item(kind="epic", title="Accounts", state="open", milestone=milestone, description="Sign-in")
    blocker = make_item(title="Schema", state="done", epic=epic)
    ticket = make_item(
        title="Login form",
        state="ready",
        epic=epic,
        milestone=milestone,
        acceptance_criteria=["Shows errors inline"],
        policy={"review": "none"},
    )
    dependency_add(actor=Actor(user=owner), blocker=blocker, blocked=ticket)
    done = _claim(blocker, member, ClaimStatus.DONE)
    _report(done, "progress", "Halfway")
    _report(done, "done", "Tables in place", ["https://git.example.com/pr/7"])
    actor = Actor(user=member)
    on_ticket = knowledge_create(
        actor=actor,
        kind="decision",
        title="Login by email",
        body="Email, not username.",
        projects=[project],
        items=[ticket],
    )
    on_epic = knowledge_create(
        actor=actor,
        kind="note",
        title="Accounts notes",
        body="Argon2 hashes.",
        projects=[project],
        items=[epic],
    )
    knowledge_create(actor=actor, kind="note", title="Unrelated", body="Nothing", projects=[project])
    skill_version_create(actor=Actor(user=maintainer), project=project, name="frontend", body="v1")
    skill_version_create(actor=Actor(user=maintainer), project=project, name="frontend", body="v2")
    Question.objects.create(
        project=project,
        asker=member,
        item=ticket,
        text="Remember me?",
        status=QuestionStatus.ANSWERED,
        answer="Yes, 30 days.",
        answered_by="user:owner",
        answered_at=timezone.now(),
    )
    Question.objects.create(project=project, asker=member, item=ticket, text="Still open?")
    return {
        "ticket": ticket,
        "epic": epic,
        "milestone": milestone,
        "blocker": blocker,
        "on_ticket": on_ticket,
        "on_epic": on_epic,
    }


def test_the_brief_holds_everything_a_worker_needs(client_for, member, plan):
    response = client_for(member).get(_url("BAL", plan["ticket"].key))
    assert response.status_code == 200, response.content
    brief = response.json()
    ticket = brief["ticket"]
    assert (ticket["key"], ticket["title"], ticket["state"]) == (plan["ticket"].key, "Login form", "ready")
    assert ticket["acceptance_criteria"] == ["Shows errors inline"]
    assert ticket["policy"] == {"review": "none"}
    assert brief["epic"]["key"] == plan["epic"].key
    assert brief["epic"]["description"] == "Sign-in"
    assert brief["milestone"]["key"] == plan["milestone"].key
    [blocker] = brief["blockers"]
    assert blocker["key"] == plan["blocker"].key
    assert blocker["state"] == "done"
    assert blocker["final_report"]["summary"] == "Tables in place"
    assert blocker["final_report"]["links"] == ["https://git.example.com/pr/7"]
    assert {entry["title"]: entry["body"] for entry in brief["knowledge"]} == {
        "Login by email": "Email, not username.",
        "Accounts notes": "Argon2 hashes.",
    }
    assert [(q["text"], q["answer"]) for q in brief["questions"]] == [("Remember me?", "Yes, 30 days.")]
    assert [(s["name"], s["version"]) for s in brief["skills"]] == [("frontend", 2)]
    assert brief["claim"] is None
    assert brief["reports"] == []


def test_the_brief_shows_the_tickets_claim_and_its_reports(client_for, member, plan):
    claim = _claim(plan["ticket"], member)
    _report(claim, "progress", "Form renders")
    brief = client_for(member).get(_url("BAL", plan["ticket"].key)).json()
    assert (brief["claim"]["id"], brief["claim"]["holder"], brief["claim"]["status"]) == (
        claim.pk,
        "member",
        "active",
    )
    assert [report["summary"] for report in brief["reports"]] == ["Form renders"]


def test_the_brief_shows_no_claim_whose_lease_ran_out_unswept(client_for, member, plan):
    claim = _claim(plan["ticket"], member)
    _report(claim, "progress", "Form renders")
    Claim.objects.filter(pk=claim.pk).update(expires_at=timezone.now() - timedelta(minutes=1))

    brief = client_for(member).get(_url("BAL", plan["ticket"].key)).json()

    assert brief["claim"] is None  # as once swept: the ticket is free for the next worker
    assert [r["summary"] for r in brief["reports"]] == ["Form renders"]
    assert Claim.objects.get(pk=claim.pk).status == ClaimStatus.ACTIVE  # nothing swept it


def test_knowledge_linked_beyond_the_readers_projects_stays_out(client_for, org, member, owner, plan):
    elsewhere = make_project(organization=org, key="SEC")
    make_membership(project=elsewhere, user=owner, role=Role.OWNER)
    knowledge_create(
        actor=Actor(user=owner),
        kind="decision",
        title="Secret",
        body="Hidden",
        projects=[plan["ticket"].project, elsewhere],
        items=[plan["ticket"]],
    )
    titles = [e["title"] for e in client_for(member).get(_url("BAL", plan["ticket"].key)).json()["knowledge"]]
    assert "Secret" not in titles
    assert "Login by email" in titles
    titles = [e["title"] for e in client_for(owner).get(_url("BAL", plan["ticket"].key)).json()["knowledge"]]
    assert "Secret" in titles


@pytest.mark.parametrize(
    ("who", "path", "status"),
    [
        ("stranger", "BAL-4", 404),  # no access to the project: it does not exist
        ("member", "BAL-999", 404),
        ("member", "BAL-2", 400),  # an epic: briefs are tickets'
        ("member", "OTH-1", 404),
    ],
)
def test_a_brief_nobody_may_read_or_no_ticket_has_is_refused(client_for, users, plan, who, path, status):
    response = client_for(users[who]).get(_url("BAL", path))
    assert response.status_code == status, response.content
    assert "error" in response.json() or "detail" in response.json() or "message" in response.json()


def test_a_viewer_reads_the_brief_and_a_key_needs_the_read_scope(api_client, viewer, member, plan):
    assert (
        api_client.get(
            _url("BAL", plan["ticket"].key), HTTP_AUTHORIZATION=f"Bearer {make_key(viewer, 'read')}"
        )
    ).status_code == 200
    ask_only = make_key(member, "ask", name="asker")
    response = api_client.get(_url("BAL", plan["ticket"].key), HTTP_AUTHORIZATION=f"Bearer {ask_only}")
    assert response.status_code == 403


def test_the_brief_costs_the_same_queries_for_a_bigger_project(client_for, member, owner, make_item, plan):
    client = client_for(member)
    client.get(_url("BAL", plan["ticket"].key))
    counts = []
    for grown in (False, True):
        if grown:
            for n in range(12):
                extra = make_item(title=f"Blocker {n}", state="done", epic=plan["epic"])
                dependency_add(actor=Actor(user=owner), blocker=extra, blocked=plan["ticket"])
                _report(_claim(extra, member, ClaimStatus.DONE), "done", f"Done {n}")
                knowledge_create(
                    actor=Actor(user=member),
                    kind="note",
                    title=f"Note {n}",
                    body="b",
                    projects=[plan["ticket"].project],
                    items=[plan["ticket"]],
                )
                Question.objects.create(
                    project=plan["ticket"].project,
                    asker=member,
                    item=plan["ticket"],
                    text=f"Q{n}",
                    status=QuestionStatus.ANSWERED,
                    answer="A",
                    answered_at=timezone.now(),
                )
        with CaptureQueriesContext(connection) as queries:
            response = client.get(_url("BAL", plan["ticket"].key))
        assert response.status_code == 200
        counts.append(len(queries))
    assert len(response.json()["blockers"]) == 13
    assert len(response.json()["knowledge"]) == 14
    assert counts[0] == counts[1], counts
