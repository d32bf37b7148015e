"""``manage.py seed_demo``: the demo it builds, idempotence, and the passwords it prints."""

from __future__ import annotations

import dataclasses
import re
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Model
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from knowledge.models import KnowledgeEntry, KnowledgeRevision
from planner.domain.inbox import inbox_entries
from planner.domain.selectors import session_list
from planner.models import HumanRequest, Question
from tracker.models import (
    ActivityEvent,
    Agent,
    ApiKey,
    Changeset,
    ChangesetStatus,
    Claim,
    Comment,
    Dependency,
    Invitation,
    Item,
    Membership,
    Organization,
    Project,
    Skill,
    SkillVersion,
)
from tracker.selectors import project_planner_config, runnable_tickets, skill_resolve
from tracker.services.activity import Actor
from tracker.services.changeset_validation import changeset_validate
from tracker.services.changesets import changeset_apply
from tracker.services.members import invitation_accept
from tracker.trust.permissions import (
    CHANGESET_APPLY,
    PLANNER_CHAT,
    TRACKER_READ,
    TRACKER_WRITE,
    has_permission,
)

pytestmark = pytest.mark.django_db


def seed(*args: str) -> str:
    out = StringIO()
    call_command("seed_demo", *args, stdout=out)
    return out.getvalue()


def counts() -> dict[str, int]:
    """Row counts of everything the seed writes."""
    models: list[type[Model]] = [
        User,
        Organization,
        Project,
        Membership,
        Item,
        Dependency,
        KnowledgeEntry,
        KnowledgeRevision,
        Skill,
        SkillVersion,
        Changeset,
        ActivityEvent,
    ]
    return {model.__name__: model._default_manager.count() for model in models}


def printed_password(output: str, username: str) -> str:
    match = re.search(rf"^{username} \(\w+\): (?:created|new) password: (\S+)$", output, re.MULTILINE)
    assert match, output
    return match.group(1)


@pytest.fixture
def demo() -> Project:
    seed()
    return Project.objects.get(key="DEMO")


def test_builds_the_plan_with_every_kind_and_states_spread(demo):
    items = Item.objects.filter(project=demo)
    assert items.filter(kind="milestone").count() == 2
    assert items.filter(kind="epic").count() == 3
    tickets = items.filter(kind="ticket")
    assert 10 <= tickets.count() <= 15
    assert {"draft", "ready", "in_progress", "in_review", "done"} <= set(
        tickets.values_list("state", flat=True)
    )
    assert all(t.epic_id or t.milestone_id for t in tickets)
    assert all(t.acceptance_criteria and t.description for t in tickets)
    assert demo.organization.slug == "demo"
    assert demo.organization.name == "Demo Org"


def test_history_goes_through_the_services(demo):
    done = Item.objects.filter(project=demo, kind="ticket", state="done")
    assert done.exists()
    assert all(item.version > 1 for item in done)
    verbs = set(ActivityEvent.objects.filter(project=demo).values_list("verb", flat=True))
    assert {"item.created", "item.updated", "dependency.added", "changeset.proposed"} <= verbs
    # The demo owner built it all; the agent asked its question and did its work.
    assert set(ActivityEvent.objects.values_list("actor", flat=True)) == {"user:demo", "user:agent"}
    by_agent = ActivityEvent.objects.filter(actor="user:agent").exclude(verb="item.updated")
    assert [(e.verb, e.data.get("kind")) for e in by_agent.order_by("seq")] == [
        ("question.asked", None),
        ("claim.taken", None),
        ("report.added", "progress"),
        ("report.added", "done"),
        ("claim.taken", None),
        ("report.added", "done"),
        ("comment.added", None),
        ("claim.taken", None),
        ("report.added", "progress"),
    ]


def test_the_agent_carried_one_ticket_to_done_left_one_in_review_and_holds_a_claim_on_another(demo):
    claims = Claim.objects.filter(project=demo).select_related("item", "holder").order_by("pk")
    done, reported, active = claims
    assert (done.holder.username, done.status, done.item.state) == ("agent", "done", "done")
    # The owner accepts this one from its page (docs/domain.md#people): it waits in review.
    assert (reported.status, reported.item.title, reported.item.state) == (
        "done",
        "Reset a forgotten password by email",
        "in_review",
    )
    assert [(r.kind, r.links) for r in reported.reports.all()] == [
        ("done", ["https://git.example.com/courtside/courtside/pull/14"])
    ]
    assert (active.holder.username, active.status, active.item.state) == ("agent", "active", "in_progress")
    assert [(r.kind, r.links) for r in done.reports.order_by("pk")] == [
        ("progress", []),
        ("done", ["https://git.example.com/courtside/courtside/pull/12"]),
    ]
    assert [r.kind for r in active.reports.all()] == ["progress"]
    assert active.expires_at > timezone.now() + timedelta(days=6)  # the demo's worker is away a while


def test_dependencies_make_the_runnable_query_non_trivial(demo):
    assert Dependency.objects.filter(blocked__project=demo).count() >= 10
    runnable = list(runnable_tickets(project=demo))
    ready = Item.objects.filter(project=demo, kind="ticket", state="ready")
    assert runnable
    assert len(runnable) < ready.count(), "some ready tickets should wait for their blockers"
    chain = Dependency.objects.filter(blocked__project=demo, blocker__blocked_by__isnull=False)
    assert chain.exists(), "some blockers should themselves be blocked"


def test_knowledge_of_every_kind_linked_and_one_revised(demo):
    entries = KnowledgeEntry.objects.filter(projects=demo)
    assert set(entries.values_list("kind", flat=True)) == {"document", "decision", "note", "debt"}
    assert all(entry.items.exists() for entry in entries)
    revised = [entry for entry in entries if entry.revisions.count() == 2]
    assert len(revised) == 1
    assert revised[0].version == 2


def test_planner_skill_has_two_versions_and_is_the_projects_skill(demo):
    effective = skill_resolve(project=demo, name="planner")
    assert effective.scope == "project"
    assert effective.latest_version == 2
    assert effective.version.version == 2
    first = effective.skill.versions.get(version=1)
    assert effective.version.body.startswith("---\nname: planner\n")
    assert effective.version.body != first.body
    assert "acceptance criteria" in first.body
    assert project_planner_config(demo).skill == "planner"


def test_one_proposed_changeset_that_still_validates(demo):
    changeset = Changeset.objects.get(project=demo)
    assert changeset.status == ChangesetStatus.PROPOSED
    assert changeset.proposed_by.username == "demo"
    assert [op["op"] for op in changeset.operations] == ["create", "update", "add_dependency"]
    assert changeset.operations[1]["base_version"] >= 1
    resolved = changeset_validate(project=demo, operations=changeset.operations, can_set_policy=False)
    assert len(resolved) == 3


def test_users_hold_their_roles(demo):
    demo_user = User.objects.get(username="demo")
    viewer = User.objects.get(username="viewer")
    assert demo_user.is_staff
    assert not viewer.is_staff
    assert Membership.objects.get(project=demo, user=demo_user).role == "owner"
    assert Membership.objects.get(project=demo, user=viewer).role == "viewer"
    assert has_permission(demo_user, demo, CHANGESET_APPLY)
    assert has_permission(viewer, demo, TRACKER_READ)
    assert not has_permission(viewer, demo, TRACKER_WRITE)


def test_users_have_e_mail_addresses(demo):
    addresses = dict(User.objects.values_list("username", "email"))
    assert addresses == {
        "demo": "demo@example.com",
        "viewer": "viewer@example.com",
        "agent": "agent@example.com",
    }


def test_the_reported_ticket_has_the_agents_comment_mentioning_demo_in_their_inbox(demo):
    demo_user = User.objects.get(username="demo")
    (comment,) = Comment.objects.filter(item__project=demo)
    assert (comment.author.username, comment.item.state) == ("agent", "in_review")
    assert list(comment.mentions.all()) == [demo_user]
    kinds = {entry.kind: entry.url for entry in inbox_entries(user=demo_user)}
    assert kinds["mention"] == f"/projects/DEMO/items/{comment.item.key}/#comment-{comment.pk}"
    assert kinds["review"] == f"/projects/DEMO/items/{comment.item.key}/"


def test_an_invitation_waits_for_viewer_who_is_not_a_member_until_accepting():
    seed()
    viewer = User.objects.get(username="viewer")
    (invitation,) = Invitation.objects.filter(user=viewer)
    website = invitation.project
    assert (website.key, website.organization.slug, invitation.status) == ("WEB", "demo", "pending")
    assert not has_permission(viewer, website, TRACKER_READ)
    assert [e.kind for e in inbox_entries(user=viewer)] == ["invitation"]
    invitation_accept(user=viewer, invitation=invitation)
    assert has_permission(viewer, website, TRACKER_READ)


def test_the_agent_is_an_agent_of_demo_with_a_key_bound_to_it(demo):
    agent = Agent.objects.select_related("user", "project").get()
    assert (agent.user.username, agent.project) == ("agent", demo)
    assert [list(key.projects.all()) for key in ApiKey.objects.filter(user=agent.user)] == [[demo]]


def test_running_twice_changes_nothing():
    seed()
    before = counts()
    output = seed()
    assert counts() == before
    assert "Already seeded, nothing changed" in output
    assert "demo (owner): exists, password unchanged" in output


def test_created_users_get_printed_passwords_that_work():
    output = seed()
    demo_password = printed_password(output, "demo")
    viewer_password = printed_password(output, "viewer")
    assert demo_password != viewer_password
    assert len(demo_password) >= 12
    assert authenticate(username="demo", password=demo_password) is not None
    assert authenticate(username="viewer", password=viewer_password) is not None


def test_reset_passwords_prints_new_ones():
    first = printed_password(seed(), "demo")
    second = printed_password(seed("--reset-passwords"), "demo")
    assert second != first
    assert authenticate(username="demo", password=first) is None
    assert authenticate(username="demo", password=second) is not None


def test_given_password_is_set_for_both_users_and_not_printed():
    output = seed("--password", "correct horse battery")
    assert "correct horse battery" not in output
    for username in ("demo", "viewer"):
        assert authenticate(username=username, password="correct horse battery") is not None


def test_empty_password_is_refused():
    with pytest.raises(CommandError):
        seed("--password", " ")
    assert not User.objects.exists()


def test_existing_users_keep_their_password_and_join_the_project():
    User.objects.create_user(username="viewer", password="kept-password-1")
    output = seed()
    assert "viewer (viewer): exists" in output
    assert authenticate(username="viewer", password="kept-password-1") is not None
    assert Membership.objects.get(project__key="DEMO", user__username="viewer").role == "viewer"


def test_the_seeded_changeset_applies_through_the_service(demo):
    demo_user = User.objects.get(username="demo")
    changeset = Changeset.objects.get(project=demo)
    applied = changeset_apply(actor=Actor(user=demo_user), changeset=changeset)
    assert (applied.status, applied.conflict_reason) == (ChangesetStatus.APPLIED, "")
    created = Item.objects.get(project=demo, title=changeset.operations[0]["fields"]["title"])
    assert applied.created_items == {changeset.operations[0]["ref"]: created.key}
    assert created.number == Item.objects.filter(project=demo).count()


def test_the_seeded_changeset_applies_from_the_admin_review_page(demo, client):
    changeset = Changeset.objects.get(project=demo)
    client.force_login(User.objects.get(username="demo"))
    response = client.post(reverse("admin:tracker_changeset_apply", args=[changeset.pk]), follow=True)
    changeset.refresh_from_db()
    assert changeset.status == ChangesetStatus.APPLIED
    messages = [str(m) for m in response.context["messages"]]
    assert messages == [
        f"Changeset #1 applied. Created {changeset.created_items[changeset.operations[0]['ref']]}."
    ]
    assert Item.objects.filter(project=demo, title=changeset.operations[0]["fields"]["title"]).exists()


def test_a_counter_behind_its_items_is_a_readable_conflict(demo):
    Project.objects.filter(pk=demo.pk).update(next_item_number=3)  # as older code could leave it
    changeset = Changeset.objects.get(project=demo)
    decided = changeset_apply(actor=Actor(user=User.objects.get(username="demo")), changeset=changeset)
    assert decided.status == ChangesetStatus.CONFLICTED
    assert (
        decided.conflict_reason
        == "operations[0]: DEMO-3 already exists: the project's item counter is behind."
    )
    assert not Item.objects.filter(project=demo, title=changeset.operations[0]["fields"]["title"]).exists()


def printed_key(output: str, new: str = "") -> str:
    match = re.search(rf"^agent \(member, a worker\): {new}API key \(read\+ask\+work\): (\S+)$", output, re.M)
    assert match, output
    return match.group(1)


def agent_reads(key: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client.get("/api/v1/projects/DEMO/runnable/").status_code


def test_the_agent_has_a_key_to_read_ask_and_work_printed_once_and_an_open_question_waiting_for_a_human():
    out = seed("--password", "pw-for-tests")
    agent = User.objects.get(username="agent")
    key = printed_key(out)
    (row,) = ApiKey.objects.filter(user=agent)
    assert (row.name, row.scopes, row.expires_at, row.status) == (
        "demo agent",
        ["read", "ask", "work"],
        None,
        "active",
    )
    assert agent_reads(key) == 200
    assert not agent.has_usable_password()
    demo = Project.objects.get(key="DEMO")
    assert has_permission(agent, demo, PLANNER_CHAT)
    question = Question.objects.get(asker=agent)
    assert question.item is not None
    assert (question.status, question.item.title, question.started) == (
        "open",
        "Export a week's bookings as CSV for the front desk",
        True,
    )
    session = question.session
    assert (session.state, session.user, session.last_message_seq) == ("paused", agent, 2)
    (request,) = HumanRequest.objects.filter(session=session, status="pending")
    assert request.kind == "question"
    assert request.options == ["Include them, marked as cancelled", "Leave them out"]
    demo_user = User.objects.get(username="demo")
    listed = list(session_list(user=demo_user, project=demo))
    assert [(s.pk, getattr(s, "waiting", None)) for s in listed] == [(session.pk, True)]
    again = seed()
    assert "agent (member, a worker): exists, API key unchanged (--reset-passwords prints a new one)" in again
    assert key.split(".")[1] not in again
    assert Question.objects.count() == 1
    assert ApiKey.objects.filter(user=agent).count() == 1
    assert agent_reads(key) == 200
    new = printed_key(seed("--reset-passwords"), new="new ")
    assert new != key
    assert agent_reads(new) == 200
    assert agent_reads(key) == 401
    assert [k.status for k in ApiKey.objects.filter(user=agent)] == ["active", "revoked"]


def test_the_seed_says_who_answers_the_chats_and_where_a_credential_goes(settings):
    settings.SERVER = dataclasses.replace(settings.SERVER, anthropic_api_key=None)
    assert "DEMO's planner: the demo planner (scripted, no AI model)" in seed()
    assert "/projects/DEMO/settings/" in seed()

    settings.SERVER = dataclasses.replace(settings.SERVER, anthropic_api_key="sk-ant-server")
    assert "DEMO's planner: Claude." in seed()
