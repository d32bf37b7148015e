"""People's notifications (docs/events.md#people): whom each kind of event concerns, what their inbox
stores and which mail is queued by their preferences, and that nobody is told of what they may not
read (another project's viewer, a removed member, someone else's request, an agent)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from planner.domain.services.agent_questions import question_ask, question_unanswered
from tests.factories import make_membership, make_project, make_user
from tracker.errors import ValidationError
from tracker.models import Claim, Event, Item, Mail, Membership, Notice, NotificationPreference, Role, Watch
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_apply, changeset_propose
from tracker.services.comments import comment_add, watch_set
from tracker.services.events import event_record
from tracker.services.items import item_update
from tracker.services.members import agent_create, invitation_create
from tracker.services.notifications import notifications_queue, notify_modes, notify_modes_set, notify_users
from tracker.services.work import claim_take, claims_expire, report_add
from tracker.signals import inbox_changed

pytestmark = pytest.mark.django_db


@pytest.fixture
def ticket(make_item):
    return make_item(title="Login form", state="ready")


def notices(user: User) -> list[tuple[str, str, str]]:
    return [(n.kind, n.title, n.url) for n in Notice.objects.filter(user=user).order_by("pk")]


def mails(user: User) -> list[tuple[str, str, str]]:
    return [(m.kind, m.mode, m.subject) for m in Mail.objects.filter(user=user).order_by("pk")]


def told(*users: User) -> set[str]:
    """Who of ``users`` got anything, notice or mail."""
    return {
        user.username
        for user in users
        if Notice.objects.filter(user=user).exists() or Mail.objects.filter(user=user).exists()
    }


def everyone(users: dict[str, Any]) -> list[User]:
    return list(users.values())


# --- whom each type concerns ------------------------------------------------------------------------


def test_a_question_left_to_the_humans_tells_the_members_who_may_answer_it(project, users, member):
    asked = question_ask(user=member, project=project, text="Which payment provider do we use?")

    question_unanswered(question_id=asked.question_id, reason="The planner found no answer.")

    assert told(*everyone(users)) == {"owner", "maintainer"}  # the asker and the viewer: no
    [(kind, mode, subject)] = mails(users["owner"])
    assert (kind, mode) == ("question", "now")
    assert subject == "[BAL] A question from an agent waits for a human: Which payment provider do we use?"
    mail = Mail.objects.get(user=users["owner"])
    assert f"http://127.0.0.1:8000/inbox/#question-{asked.question_id}" in mail.body
    assert "The planner found no answer." in mail.body
    assert notices(users["owner"]) == []  # the inbox shows the question itself


def test_a_request_waiting_tells_only_the_human_of_its_chat(project, users, member):
    session = uuid.uuid4()
    event_record(
        project=project,
        type="request.waiting",
        actor=f"planner:{session}",
        on_behalf_of=member,
        target="request:7",
        data={"kind": "approval", "session": str(session), "tool": "propose_changeset", "question": ""},
        private_to=member,
    )

    assert told(*everyone(users)) == {"member"}
    [mail] = Mail.objects.filter(user=member)
    assert (mail.kind, mail.mode, mail.url) == ("approval", "now", f"/projects/BAL/chat/{session}/")
    assert mail.subject == "[BAL] The planner waits for your approval to propose changeset"


def test_a_proposed_changeset_tells_those_who_may_apply_it_but_its_proposer(project, users, ticket):
    changeset_propose(
        actor=Actor(user=users["maintainer"]),
        project=project,
        title="Retitle the login form",
        operations=[{"op": "update", "item": ticket.key, "base_version": 1, "fields": {"title": "Sign in"}}],
    )

    assert told(*everyone(users)) == {"owner"}
    assert mails(users["owner"]) == [
        ("changeset", "digest", "[BAL] maintainer proposes changeset #1: Retitle the login form")
    ]
    assert Mail.objects.get(user=users["owner"]).url == "/projects/BAL/changesets/1/"


def test_whoever_proposed_a_ticket_watches_it_once_applied_and_is_told_when_it_moves(project, users):
    proposed = changeset_propose(
        actor=Actor(user=users["member"]),
        project=project,
        title="Add the sign-up form",
        operations=[{"op": "create", "kind": "ticket", "fields": {"title": "Sign-up form"}}],
    )
    assert not Watch.objects.exists()  # a proposal watches nothing until it is applied

    applied = changeset_apply(actor=Actor(user=users["owner"]), changeset=proposed)
    created = Item.objects.get(project=project, number=int(applied.created_items["#0"].rpartition("-")[2]))
    item_update(actor=Actor(user=users["owner"]), item=created, fields={"state": "ready"})

    assert list(Watch.objects.values_list("user__username", "item_id")) == [("member", created.pk)]
    [notice] = Notice.objects.filter(user=users["member"])
    assert (notice.kind, notice.url) == ("watched", f"/projects/BAL/items/{created.key}/")


def test_an_agent_that_proposed_a_ticket_does_not_watch_it(project, users):
    agent, _, _ = agent_create(
        actor=Actor(user=users["owner"]), project=project, name="CI bot", scopes=["read", "plan"]
    )
    proposed = changeset_propose(
        actor=Actor(user=agent.user),
        project=project,
        title="Add the sign-up form",
        operations=[{"op": "create", "kind": "ticket", "fields": {"title": "Sign-up form"}}],
    )

    changeset_apply(actor=Actor(user=users["owner"]), changeset=proposed)

    assert Item.objects.filter(project=project, title="Sign-up form").exists()
    assert not Watch.objects.exists()


def test_a_watched_ticket_that_moves_tells_its_watchers_and_its_holder(project, users, ticket):
    watch_set(user=users["viewer"], item=ticket, on=True)
    claim = claim_take(actor=Actor(user=users["member"]), project=project, item=ticket)

    # The claim moved the ticket too, in the same transaction: one notice, the mail says both.
    url = f"/projects/BAL/items/{ticket.key}/"
    assert notices(users["viewer"]) == [("watched", f"member claimed {ticket.key}: Login form", url)]
    [mail] = Mail.objects.filter(user=users["viewer"])
    assert f"Before: member moved {ticket.key} to in progress: Login form" in mail.body
    assert told(*everyone(users)) == {"viewer"}  # the holder took it: not told of their own claim

    item_update(actor=Actor(user=users["owner"]), item=ticket, fields={"priority": "urgent"})

    words = f"owner changed the priority of {ticket.key}: Login form"
    assert notices(users["member"]) == [("watched", words, url)]  # the claim's holder
    assert notices(users["viewer"])[-1] == ("watched", words, url)
    assert mails(users["member"]) == [("ticket", "digest", f"[BAL] {words}")]

    report_add(actor=Actor(user=users["member"]), claim=claim, kind="done", summary="Shipped the form.")

    assert notices(users["viewer"])[-1][1] == f"member reported done on {ticket.key}: Login form"
    report = Mail.objects.filter(user=users["viewer"]).latest("pk")
    assert "Shipped the form." in report.body
    assert f"Before: member moved {ticket.key} to in review: Login form" in report.body
    assert told(users["owner"], users["maintainer"]) == set()  # never watched, never held


def test_a_report_is_told_with_its_summary(project, users, ticket):
    claim = claim_take(actor=Actor(user=users["member"]), project=project, item=ticket)
    watch_set(user=users["viewer"], item=ticket, on=True)

    report_add(actor=Actor(user=users["member"]), claim=claim, kind="progress", summary="Half of it works.")

    [notice] = Notice.objects.filter(user=users["viewer"])
    assert notice.title == f"member reported progress on {ticket.key}: Login form"
    assert "Half of it works." in Mail.objects.get(user=users["viewer"]).body


def test_an_expired_claim_tells_its_holder_and_the_watchers(project, users, ticket):
    claim = claim_take(actor=Actor(user=users["member"]), project=project, item=ticket)
    watch_set(user=users["viewer"], item=ticket, on=True)
    past = timezone.now() - timedelta(minutes=1)
    Claim.objects.filter(pk=claim.pk).update(renewed_at=past - timedelta(minutes=30), expires_at=past)

    assert claims_expire() == 1

    assert mails(users["member"]) == [
        ("claim", "digest", f"[BAL] Your claim on {ticket.key} expired: Login form")
    ]
    assert notices(users["member"]) == []  # the inbox shows an expired claim itself
    # One notice of the ticket says where it ended up; its mail says all three, in their order.
    titles = [title for _, title, _ in notices(users["viewer"])]
    assert titles == [f"{ticket.key} can be worked on now: Login form"]
    [mail] = Mail.objects.filter(user=users["viewer"])
    assert mail.body.index(f"Before: Ballet moved {ticket.key} to ready") < mail.body.index(
        f"Before: The claim of member on {ticket.key} expired"
    )


def test_a_comment_tells_the_mentioned_at_once_and_the_watchers_in_the_digest(project, users, ticket):
    watch_set(user=users["maintainer"], item=ticket, on=True)
    watch_set(user=users["owner"], item=ticket, on=True)

    comment = comment_add(actor=Actor(user=users["member"]), item=ticket, body="@owner, see <b>this</b>.")

    url = f"/projects/BAL/items/{ticket.key}/#comment-{comment.pk}"
    assert mails(users["owner"]) == [
        ("mention", "now", f"[BAL] member mentioned you on {ticket.key}: Login form")
    ]
    assert mails(users["maintainer"]) == [
        ("ticket", "digest", f"[BAL] member commented on {ticket.key}: Login form")
    ]
    owners = Mail.objects.get(user=users["owner"])
    assert owners.url == url
    assert f"http://127.0.0.1:8000{url}" in owners.body
    assert "@owner, see <b>this</b>." in owners.body  # plain text: the HTML part escapes it


def test_an_invitation_tells_the_invitee_who_cannot_read_the_project_yet(project, owner):
    alice = make_user(username="alice")

    invitation = invitation_create(actor=Actor(user=owner), project=project, username="alice", role="member")

    [mail] = Mail.objects.filter(user=alice)
    assert (mail.kind, mail.mode, mail.url) == ("invitation", "now", f"/inbox/#invitation-{invitation.pk}")
    assert mail.subject == "[BAL] owner invites you to BAL · Ballet as member"


def test_a_webhook_disabled_tells_its_owners(project, users, other_project):
    stranger = make_membership(project=other_project, role=Role.OWNER).user

    notify_users(
        [users["owner"], stranger],
        "webhook",
        "Webhook “ci” was disabled",
        "/projects/BAL/webhooks/1/",
        project,
    )

    assert notices(users["owner"]) == [
        ("webhook_disabled", "Webhook “ci” was disabled", "/projects/BAL/webhooks/1/")
    ]
    assert mails(users["owner"]) == [("webhook", "digest", "[BAL] Webhook “ci” was disabled")]
    assert told(stranger) == set()
    with pytest.raises(ValueError, match="unknown notification kind"):
        notify_users([users["owner"]], "nonsense", "x", "/", project)


def test_people_hear_their_inbox_changed_once_it_commits(
    project, users, ticket, django_capture_on_commit_callbacks
):
    heard: list[list[int]] = []

    def receiver(sender: Any, *, user_ids: list[int], **kwargs: Any) -> None:
        heard.append(user_ids)

    inbox_changed.connect(receiver, dispatch_uid="test-inbox-changed")
    try:
        with django_capture_on_commit_callbacks(execute=True) as hooks:
            comment_add(actor=Actor(user=users["member"]), item=ticket, body="@owner and @viewer")
            assert heard == []  # not before the commit
    finally:
        inbox_changed.disconnect(dispatch_uid="test-inbox-changed")
    assert heard == [sorted([users["owner"].pk, users["viewer"].pk])]
    assert len(hooks) >= 1


@pytest.mark.django_db(transaction=True)
def test_told_outside_a_transaction_they_hear_it_once_it_is_written(project, users):
    heard: list[list[int]] = []

    def receiver(sender: Any, *, user_ids: list[int], **kwargs: Any) -> None:
        heard.append([*user_ids, Notice.objects.filter(user_id__in=user_ids).count()])

    inbox_changed.connect(receiver, dispatch_uid="test-inbox-changed-autocommit")
    try:
        notify_users([users["owner"]], "webhook", "Webhook “ci” was disabled", "/projects/BAL/", project)
    finally:
        inbox_changed.disconnect(dispatch_uid="test-inbox-changed-autocommit")
    assert heard == [[users["owner"].pk, 1]]  # told after its notice was stored, not before


# --- preferences ------------------------------------------------------------------------------------


def test_the_defaults_send_at_once_questions_approvals_mentions_and_invitations(member):
    assert notify_modes(user=member) == {
        "question": "now",
        "approval": "now",
        "changeset": "digest",
        "ticket": "digest",
        "mention": "now",
        "claim": "digest",
        "webhook": "digest",
        "invitation": "now",
    }


def test_preferences_choose_now_digest_or_off_per_kind(users, ticket):
    owner, maintainer = users["owner"], users["maintainer"]
    notify_modes_set(user=owner, modes={"mention": "off"})
    notify_modes_set(user=maintainer, modes={"ticket": "now", "mention": "digest"})
    watch_set(user=maintainer, item=ticket, on=True)

    comment_add(actor=Actor(user=users["member"]), item=ticket, body="@owner @maintainer look")

    assert mails(owner) == []  # off: no mail, the inbox all the same
    assert [kind for kind, _, _ in notices(owner)] == ["mention"]
    assert [(kind, mode) for kind, mode, _ in mails(maintainer)] == [("mention", "digest")]
    assert notify_modes(user=maintainer)["ticket"] == "now"


def test_turning_a_kind_off_drops_its_mail_waiting_to_go(users, ticket):
    owner = users["owner"]
    comment_add(actor=Actor(user=users["member"]), item=ticket, body="@owner first")
    assert Mail.objects.filter(user=owner, status="pending").count() == 1

    notify_modes_set(user=owner, modes={"mention": "off"})

    assert not Mail.objects.filter(user=owner).exists()


@pytest.mark.parametrize(
    "modes", [{"mention": "sometimes"}, {"nonsense": "now"}, {"mention": "off", "ticket": None}]
)
def test_a_bad_preference_changes_nothing(member, modes):
    with pytest.raises(ValidationError):
        notify_modes_set(user=member, modes=modes)
    assert not NotificationPreference.objects.exists()


def test_a_user_without_an_address_gets_the_inbox_and_no_mail(users, ticket):
    User.objects.filter(pk=users["owner"].pk).update(email="")

    comment_add(actor=Actor(user=users["member"]), item=ticket, body="@owner look")

    assert [kind for kind, _, _ in notices(users["owner"])] == ["mention"]
    assert mails(users["owner"]) == []


# --- nobody is told of what they may not read -------------------------------------------------------


def test_a_removed_member_who_still_watches_is_not_told(users, ticket):
    watch_set(user=users["viewer"], item=ticket, on=True)
    Membership.objects.filter(user=users["viewer"]).delete()

    item_update(actor=Actor(user=users["owner"]), item=ticket, fields={"title": "Sign in form"})

    assert told(users["viewer"]) == set()


def test_a_viewer_of_another_project_is_never_told_of_this_one(org, users, ticket):
    neighbour = make_project(organization=org, key="NEXT")
    outsider = make_membership(project=neighbour, user=make_user(username="outsider"), role=Role.VIEWER).user
    Watch.objects.create(item=ticket, user=outsider)  # left from before, or written by hand

    item_update(actor=Actor(user=users["owner"]), item=ticket, fields={"title": "Sign in form"})
    notify_users([outsider], "ticket", "BAL moved", f"/projects/BAL/items/{ticket.key}/", ticket.project)

    assert told(outsider) == set()


def test_a_request_is_told_to_no_one_but_the_one_it_is_private_to(project, users):
    Membership.objects.filter(user=users["member"]).delete()  # the chat's human left the project since
    event_record(
        project=project,
        type="request.waiting",
        actor="planner:x",
        on_behalf_of=users["member"],
        target="request:8",
        data={"kind": "question", "session": "x", "question": "Which colour?"},
        private_to=users["member"],
    )

    assert told(*everyone(users)) == set()


def test_an_event_that_requires_other_projects_tells_only_who_reads_them_all(org, project, users, ticket):
    neighbour = make_project(organization=org, key="NEXT")
    make_membership(project=neighbour, user=users["maintainer"], role=Role.VIEWER)
    for user in (users["viewer"], users["maintainer"]):
        watch_set(user=user, item=ticket, on=True)
    event = Event.objects.create(
        organization=org,
        project=project,
        type="item.updated",
        actor="user:owner",
        on_behalf_of=users["owner"],
        target=ticket.key,
        data={"changes": {"title": ["Login form", "Sign in"]}},
        requires=[project.pk, neighbour.pk],
    )

    notifications_queue([event])

    assert told(users["viewer"], users["maintainer"]) == {"maintainer"}


def test_agents_and_inactive_users_are_never_told(project, users, ticket):
    agent, _, _ = agent_create(
        actor=Actor(user=users["owner"]), project=project, name="CI bot", scopes=["read"]
    )
    User.objects.filter(pk=agent.user_id).update(email="bot@example.com")
    gone = make_membership(project=project, user=make_user(username="gone"), role=Role.MEMBER).user
    for user in (agent.user, gone):
        Watch.objects.create(item=ticket, user=user)
    User.objects.filter(pk=gone.pk).update(is_active=False)

    item_update(actor=Actor(user=users["owner"]), item=ticket, fields={"title": "Sign in form"})

    assert told(agent.user, gone) == set()


def test_an_event_private_to_one_user_tells_no_other_watcher(org, project, users, ticket):
    for user in (users["viewer"], users["member"]):
        watch_set(user=user, item=ticket, on=True)
    event = Event.objects.create(
        organization=org,
        project=project,
        type="item.updated",
        actor="user:owner",
        on_behalf_of=users["owner"],
        target=ticket.key,
        data={"changes": {"title": ["Login form", "Sign in"]}},
        private_to=users["member"],
    )

    notifications_queue([event])

    assert told(users["viewer"], users["member"]) == {"member"}
