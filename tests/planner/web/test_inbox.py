"""The inbox (docs/domain.md#the-inbox): each kind of entry reaches the user it waits for and nobody
else, dismissing puts it away, the page and the header show it, and reading it costs a fixed number
of queries however many projects."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from pytest_django.asserts import assertContains, assertNotContains

from planner.domain.inbox import MAX_ENTRIES, inbox_count, inbox_entries
from planner.domain.services.inbox import inbox_dismiss
from planner.domain.services.sessions import session_create
from planner.models import HumanRequest, Question, QuestionStatus, RequestKind, RequestStatus
from tests.factories import MembershipFactory, UserFactory, make_project
from tracker.errors import NotFoundError
from tracker.models import (
    Changeset,
    Claim,
    ClaimStatus,
    Dismissal,
    Invitation,
    InvitationStatus,
    Membership,
    Notice,
)
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose
from tracker.services.items import item_create

pytestmark = pytest.mark.django_db


def ids(user: Any) -> set[str]:
    return {entry.id for entry in inbox_entries(user=user)}


def kinds(user: Any) -> dict[str, str]:
    return {entry.id: entry.kind for entry in inbox_entries(user=user)}


def pending(session: Any, kind: str = RequestKind.QUESTION, tool: str = "propose_changeset") -> HumanRequest:
    return HumanRequest.objects.create(
        session=session,
        turn=1,
        tool_use_id=f"toolu_{HumanRequest.objects.count()}",
        kind=kind,
        question="Replica or primary?" if kind == RequestKind.QUESTION else "",
        tool="" if kind == RequestKind.QUESTION else tool,
    )


def request_id(request: HumanRequest) -> str:
    return f"request-{request.pk.hex}"


def propose(project: Any, user: Any, title: str = "Add an epic") -> Changeset:
    return changeset_propose(
        actor=Actor(user=user),
        project=project,
        title=title,
        operations=[{"op": "create", "kind": "epic", "fields": {"title": "E"}}],
    )


def claim(item: Any, holder: Any, **fields: Any) -> Claim:
    now = timezone.now()
    values = {"renewed_at": now - timedelta(minutes=40), "expires_at": now - timedelta(minutes=10)}
    values.update(fields)
    return Claim.objects.create(project=item.project, item=item, holder=holder, **values)


@pytest.fixture
def agent(project):
    user = UserFactory(username="agent")
    MembershipFactory(project=project, user=user, role="member")
    return user


@pytest.fixture
def outsider(other_project):
    """A member of another project only."""
    user = UserFactory(username="outsider")
    MembershipFactory(project=other_project, user=user, role="owner")
    return user


@pytest.fixture
def left_to_humans(project, agent, make_item):
    """An agent's question its sub-chat could not answer: left to the project's humans."""
    item = make_item(title="Export bookings")
    question = Question.objects.create(
        project=project,
        asker=agent,
        item=item,
        text="Which <b>database</b>?",
        started=True,
        status=QuestionStatus.NEEDS_HUMAN,
    )
    session = session_create(user=agent, project=project, title="Which database?")
    session.question = question
    session.save(update_fields=["question"])
    return question


# -- who sees what -------------------------------------------------------------------


def test_a_question_left_to_humans_waits_for_those_who_may_chat_not_its_asker(
    users, agent, outsider, left_to_humans
):
    entry = f"question-{left_to_humans.pk}"
    for name in ("member", "maintainer", "owner"):
        assert kinds(users[name]) == {entry: "question"}, name
    for user in (agent, users["viewer"], users["stranger"], outsider):
        assert entry not in ids(user), user
    found = inbox_entries(user=users["member"])[0]
    assert found.project == "BAL"
    assert found.title == f"{left_to_humans.item.key}: Which <b>database</b>?"  # plain text; pages escape
    assert found.url == f"/projects/BAL/chat/{left_to_humans.session.pk}/"


def test_an_answered_question_leaves_the_inbox(users, left_to_humans):
    Question.objects.filter(pk=left_to_humans.pk).update(status=QuestionStatus.ANSWERED)
    assert ids(users["member"]) == set()


def test_a_request_in_a_chat_waits_for_its_owner_only(project, users):
    session = session_create(user=users["member"], project=project, title="Mine")
    asked = pending(session)
    approval = pending(session, RequestKind.APPROVAL)
    assert kinds(users["member"]) == {request_id(asked): "request", request_id(approval): "approval"}
    for name in ("maintainer", "owner", "viewer", "stranger"):
        assert ids(users[name]) == set(), name
    HumanRequest.objects.filter(pk=asked.pk).update(status=RequestStatus.ANSWERED)
    assert ids(users["member"]) == {request_id(approval)}


def test_a_sub_chats_approval_waits_for_those_who_apply_and_its_question_for_every_chatter(
    project, users, agent, left_to_humans
):
    Question.objects.filter(pk=left_to_humans.pk).update(status=QuestionStatus.OPEN)
    sub_chat = left_to_humans.session
    asked, approval = pending(sub_chat), pending(sub_chat, RequestKind.APPROVAL)
    for name in ("maintainer", "owner"):
        assert ids(users[name]) == {request_id(asked), request_id(approval)}, name
    assert ids(users["member"]) == {request_id(asked)}
    assert ids(agent) == {request_id(asked)}  # the asker answers questions, never approvals
    assert ids(users["viewer"]) == set()


def test_a_proposed_changeset_waits_for_those_who_apply(project, users, outsider):
    changeset = propose(project, users["member"])
    entry = f"changeset-BAL-{changeset.number}"
    for name in ("maintainer", "owner"):
        assert kinds(users[name]) == {entry: "changeset"}, name
    for user in (users["member"], users["viewer"], users["stranger"], outsider):
        assert ids(user) == set(), user
    assert inbox_entries(user=users["owner"])[0].url == f"/projects/BAL/changesets/{changeset.number}/"


def test_with_four_eyes_ones_own_changeset_waits_for_the_others(project, users):
    changeset = propose(project, users["maintainer"])
    entry = f"changeset-BAL-{changeset.number}"
    assert entry in ids(users["maintainer"])  # without four eyes its proposer may apply it
    project.settings = {"four_eyes": True}
    project.save(update_fields=["settings"])
    assert entry not in ids(users["maintainer"])
    assert entry in ids(users["owner"])


def test_a_ticket_in_review_waits_for_those_who_accept(users, make_item, outsider):
    ticket = make_item(title="Login form", state="in_review")
    entry = f"review-{ticket.key}-{ticket.version}"
    for name in ("maintainer", "owner"):
        assert kinds(users[name]) == {entry: "review"}, name
    for user in (users["member"], users["viewer"], users["stranger"], outsider):
        assert ids(user) == set(), user
    assert inbox_entries(user=users["owner"])[0].url == f"/projects/BAL/items/{ticket.key}/"


def test_an_expired_claim_waits_for_its_holder_a_week(users, make_item):
    member, now = users["member"], timezone.now()
    lapsed = claim(make_item(title="Lapsed"), member)  # active, its lease run out: not swept yet
    swept = claim(make_item(title="Swept"), member, status=ClaimStatus.EXPIRED, ended_at=now)
    claim(make_item(title="Held"), member, expires_at=now + timedelta(minutes=20))
    claim(make_item(title="Done"), member, status=ClaimStatus.DONE, ended_at=now)
    claim(
        make_item(title="Long ago"),
        member,
        status=ClaimStatus.EXPIRED,
        expires_at=now - timedelta(days=8),
        ended_at=now - timedelta(days=8),
    )
    assert kinds(member) == {f"claim-{lapsed.pk}": "claim_expired", f"claim-{swept.pk}": "claim_expired"}
    assert ids(users["owner"]) == set()


def test_an_invitation_waits_for_the_invited_user(other_project, project, users, outsider):
    stranger = users["stranger"]
    invitation = Invitation.objects.create(project=other_project, user=stranger, invited_by=outsider)
    Invitation.objects.create(project=project, user=stranger, status=InvitationStatus.DECLINED)
    [entry] = inbox_entries(user=stranger)
    assert (entry.id, entry.kind, entry.project) == (f"invitation-{invitation.pk}", "invitation", "OTH")
    assert entry.url == f"/inbox/#invitation-{invitation.pk}"
    assert entry.invitation_id == invitation.pk
    assert ids(outsider) == set()


def test_notices_wait_for_their_user_while_they_read_the_project(project, users):
    member = users["member"]
    mention = Notice.objects.create(
        user=member, project=project, kind="mention", title="owner mentioned you", url="/projects/BAL/"
    )
    revoked = Notice.objects.create(user=member, kind="key_revoked", title="Your key was revoked")
    assert kinds(member) == {f"notice-{mention.pk}": "mention", f"notice-{revoked.pk}": "key_revoked"}
    assert ids(users["owner"]) == set()
    Membership.objects.filter(user=member, project=project).delete()  # removed from the project
    assert ids(member) == {f"notice-{revoked.pk}"}


def test_a_notice_links_only_to_this_site(project, member):
    for url in ("javascript:alert(1)", "//evil.example/", "https://evil.example/"):
        notice = Notice.objects.create(user=member, project=project, kind="mention", title="x", url=url)
        [entry] = [e for e in inbox_entries(user=member) if e.id == f"notice-{notice.pk}"]
        assert entry.url == f"/inbox/#notice-{notice.pk}"


def test_someone_removed_sees_nothing_of_the_project_any_more(project, users, make_item, left_to_humans):
    maintainer = users["maintainer"]
    propose(project, users["member"])
    make_item(title="In review", state="in_review")
    assert len(ids(maintainer)) == 3
    Membership.objects.filter(user=maintainer, project=project).delete()
    assert ids(maintainer) == set()


def test_entries_are_newest_first_and_bounded(project, member, monkeypatch):
    for n in range(5):
        Notice.objects.create(user=member, project=project, kind="mention", title=f"Mention {n}")
    listed = inbox_entries(user=member)
    assert [entry.title for entry in listed] == [f"Mention {n}" for n in reversed(range(5))]
    assert [entry.title for entry in inbox_entries(user=member, limit=2)] == ["Mention 4", "Mention 3"]
    assert inbox_count(user=member) == 5
    assert MAX_ENTRIES == 200


# -- dismissing ------------------------------------------------------------------------


def test_dismissing_puts_an_entry_away_and_twice_changes_nothing(project, users):
    owner = users["owner"]
    changeset = propose(project, users["member"])
    other = propose(project, users["member"], title="Another")
    entry = f"changeset-BAL-{changeset.number}"
    inbox_dismiss(user=owner, entry_id=entry)
    inbox_dismiss(user=owner, entry_id=entry)
    assert ids(owner) == {f"changeset-BAL-{other.number}"}
    assert inbox_count(user=owner) == 1
    assert Dismissal.objects.filter(user=owner, entry=entry).count() == 1
    assert entry in ids(users["maintainer"])  # one's dismissal is one's own


def test_a_ticket_edited_in_review_comes_back_after_a_dismissal(users, make_item):
    owner = users["owner"]
    ticket = make_item(title="Login form", state="in_review")
    inbox_dismiss(user=owner, entry_id=f"review-{ticket.key}-{ticket.version}")
    assert ids(owner) == set()
    type(ticket).objects.filter(pk=ticket.pk).update(version=ticket.version + 1)
    assert ids(owner) == {f"review-{ticket.key}-{ticket.version + 1}"}


@pytest.mark.parametrize(
    "entry", ["notice-999999", "changeset-BAL-999", "nothing-1", "notice-", "", "a" * 200, "notice-1\x00"]
)
def test_dismissing_what_is_not_in_ones_inbox_is_not_found(member, entry):
    with pytest.raises(NotFoundError):
        inbox_dismiss(user=member, entry_id=entry)
    assert not Dismissal.objects.exists()


def test_dismissing_another_users_entry_is_not_found(project, users):
    notice = Notice.objects.create(user=users["owner"], project=project, kind="mention", title="x")
    with pytest.raises(NotFoundError):
        inbox_dismiss(user=users["member"], entry_id=f"notice-{notice.pk}")
    changeset = propose(project, users["member"])
    with pytest.raises(NotFoundError):  # the viewer may not decide it: not theirs to dismiss
        inbox_dismiss(user=users["viewer"], entry_id=f"changeset-BAL-{changeset.number}")
    assert not Dismissal.objects.exists()


# -- cost --------------------------------------------------------------------------------


def _world(owner: Any, n: int) -> None:
    """``n`` more projects where ``owner`` has one entry of each kind."""
    for _ in range(n):
        other = make_project(key=f"P{Changeset.objects.count() + Notice.objects.count()}X")
        MembershipFactory(project=other, user=owner, role="owner")
        writer = UserFactory()
        MembershipFactory(project=other, user=writer, role="member")
        propose(other, writer)
        ticket = item_create(actor=Actor(user=owner), project=other, kind="ticket", fields={"title": "T"})
        item_create(
            actor=Actor(user=owner), project=other, kind="ticket", fields={"title": "R", "state": "in_review"}
        )
        claim(ticket, owner)
        Notice.objects.create(user=owner, project=other, kind="mention", title="m")
        pending(session_create(user=owner, project=other, title="c"))
        Invitation.objects.create(project=make_project(key=f"I{Notice.objects.count()}X"), user=owner)


def test_the_inbox_reads_a_fixed_number_of_queries(owner, django_assert_max_num_queries):
    _world(owner, 1)
    with django_assert_max_num_queries(10):
        few = inbox_entries(user=owner)
    _world(owner, 6)
    with django_assert_max_num_queries(10):
        many = inbox_entries(user=owner)
    assert len(few) == 6
    assert len(many) == 42
    with django_assert_max_num_queries(3):
        assert inbox_count(user=owner) == 42


def test_a_superuser_reads_a_fixed_number_of_queries_too(superuser, owner, django_assert_max_num_queries):
    _world(owner, 3)
    with django_assert_max_num_queries(10):
        listed = inbox_entries(user=superuser)
    assert {entry.kind for entry in listed} == {"changeset", "review"}  # theirs to decide, not owner's own


# -- the page ---------------------------------------------------------------------------


def test_the_page_labels_links_and_escapes_each_entry(client, project, users, left_to_humans, make_item):
    owner = users["owner"]
    changeset = propose(project, users["member"], title="Split <the> epic")
    ticket = make_item(title="Login form", state="in_review")
    client.force_login(owner)
    response = client.get("/inbox/")
    assert response.status_code == 200
    assert "default-src 'none'" in response["Content-Security-Policy"]
    for words in ("Question from an agent", "Changeset to review", "Ticket in review"):
        assertContains(response, words)
    assertContains(response, f'href="/projects/BAL/changesets/{changeset.number}/"')
    assertContains(response, f'href="/projects/BAL/items/{ticket.key}/"')
    assertContains(response, "Split &lt;the&gt; epic")
    assertContains(response, "Which &lt;b&gt;database&lt;/b&gt;?")
    assertNotContains(response, "<b>database</b>")
    assertContains(response, f'action="/inbox/changeset-BAL-{changeset.number}/dismiss/"')
    assertContains(response, ">Dismiss<", count=3)
    assertContains(response, "3 waiting for you")


def test_the_page_names_mentions_claims_invitations_and_revoked_keys(
    client, project, other_project, member, make_item
):
    Notice.objects.create(user=member, project=project, kind="mention", title="owner mentioned you")
    Notice.objects.create(user=member, kind="key_revoked", title="Your key “ci” was revoked")
    claim(make_item(title="Lapsed"), member)
    invitation = Invitation.objects.create(project=other_project, user=member)
    client.force_login(member)
    response = client.get("/inbox/")
    for words in ("Mention", "Key revoked", "Your claim expired", "Invitation"):
        assertContains(response, words)
    assertContains(response, f'id="invitation-{invitation.pk}"')
    assertContains(response, f'action="/invitations/{invitation.pk}/accept/"')
    assertContains(response, f'action="/invitations/{invitation.pk}/decline/"')


def test_the_page_says_when_nothing_waits(client, member):
    client.force_login(member)
    assertContains(client.get("/inbox/"), "Your inbox is empty")


def test_the_page_needs_a_sign_in(client):
    response = client.get("/inbox/")
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_the_dismiss_button_works_without_script(client, project, member):
    notice = Notice.objects.create(user=member, project=project, kind="mention", title="Look at this")
    client.force_login(member)
    response = client.post(f"/inbox/notice-{notice.pk}/dismiss/")
    assert response.status_code == 302
    assert response["Location"] == "/inbox/"
    assertNotContains(client.get("/inbox/"), "Look at this")
    assert client.post("/inbox/notice-999999/dismiss/").status_code == 404
    assert client.get(f"/inbox/notice-{notice.pk}/dismiss/").status_code == 405


def test_another_users_entry_cannot_be_dismissed_from_the_page(client, project, users):
    notice = Notice.objects.create(user=users["owner"], project=project, kind="mention", title="x")
    client.force_login(users["member"])
    assert client.post(f"/inbox/notice-{notice.pk}/dismiss/").status_code == 404
    assert not Dismissal.objects.exists()


# -- the header ---------------------------------------------------------------------------


def test_every_page_header_counts_the_inbox(client, project, member):
    client.force_login(member)
    response = client.get("/")
    assertContains(response, 'class="inbox-link" href="/inbox/"')
    assertContains(response, "0 waiting in your inbox")
    Notice.objects.create(user=member, project=project, kind="mention", title="a")
    Notice.objects.create(user=member, project=project, kind="mention", title="b")
    for url in ("/", "/projects/BAL/", "/keys/", "/inbox/"):
        response = client.get(url)
        assertContains(response, '<span class="inbox-count" data-inbox-count>2</span>', html=False)
        assertContains(response, "2 waiting in your inbox")
        assertContains(response, "planner/inbox_count")


def test_an_anonymous_page_shows_no_inbox(client):
    response = client.get("/accounts/login/")
    assertNotContains(response, "inbox-link")
    assertNotContains(response, "inbox_count")
