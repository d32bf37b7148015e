"""The chat pages' habits (docs/protocol.md#retry-and-edit): recent chats beside the conversation,
the archived chats and Unarchive, and "just now" in the chat list."""

from __future__ import annotations

import re
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pytest_django.asserts import assertContains, assertNotContains

from planner.domain.services.chats import session_archive
from planner.domain.services.sessions import session_create
from planner.models import HumanRequest, RequestKind, Session
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tests.planner.conftest import chat_url


def unarchive_url(session: Session) -> str:
    return f"{chat_url(session)}unarchive/"


def titled(user, project, title: str) -> Session:
    return session_create(user=user, project=project, title=title)


def sidebar(html: str) -> str:
    return html[html.index('<aside id="chat-sidebar"') : html.index("</aside>")]


def test_the_sidebar_lists_the_readers_recent_chats_waiting_ones_first(
    signed_in, member, chat_project, owner
):
    titled(member, chat_project, "Older talk")
    waiting = titled(member, chat_project, "Needs an answer")
    HumanRequest.objects.create(session=waiting, turn=1, tool_use_id="toolu_1", kind=RequestKind.QUESTION)
    Session.objects.filter(pk=waiting.pk).update(updated_at=timezone.now() - timedelta(days=2))
    current = titled(member, chat_project, "This one")
    titled(owner, chat_project, "The owner's own")  # not the member's to see
    gone = titled(member, chat_project, "Archived talk")
    session_archive(session_id=gone.pk, user=member)
    other = ProjectFactory(organization=chat_project.organization, key="OTH", name="Other")
    MembershipFactory(project=other, user=member, role="member")
    titled(member, other, "Elsewhere")

    html = sidebar(signed_in(member).get(chat_url(current)).content.decode())
    titles = re.findall(r'<span class="recent-title">(?:<span[^>]*>[^<]*</span> )?([^<]+)</span>', html)
    assert titles == ["Needs an answer", "This one", "Older talk"]
    assert html.count('aria-current="page"') == 1
    assert re.search(rf'href="{chat_url(current)}" aria-current="page"', html)
    assert '<li class="waiting">' in html
    assert html.count("waiting for you") == 1
    assert 'aria-controls="recent-chats"' in html


def test_the_chat_pages_queries_do_not_grow_with_the_chats_in_the_sidebar(signed_in, member, chat_project):
    current = titled(member, chat_project, "First")
    client = signed_in(member)
    client.get(chat_url(current))  # warm: sessions, caches

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(chat_url(current)).status_code == 200
        return len(queries)

    few = count()
    for n in range(8):
        chat = titled(member, chat_project, f"Chat {n}")
        HumanRequest.objects.create(session=chat, turn=1, tool_use_id=f"t{n}", kind=RequestKind.QUESTION)
    assert count() == few


def test_a_viewer_reads_the_sidebar_of_what_they_may_see(signed_in, member, chat_project, users):
    chat = titled(member, chat_project, "Member's chat")
    response = signed_in(users["viewer"]).get(chat_url(chat), follow=False)
    assert response.status_code == 404  # another's chat is not theirs to open
    # A viewer's own chat, left from when they could chat: they read it, and the sidebar holds
    # only what they may read.
    own = Session.objects.create(project=chat_project, user=users["viewer"], title="Viewer's old chat")
    html = sidebar(signed_in(users["viewer"]).get(chat_url(own)).content.decode())
    assert "Viewer&#x27;s old chat" in html
    assert "Member&#x27;s chat" not in html


def test_the_list_says_just_now_for_a_chat_updated_within_the_minute(signed_in, member, chat_project):
    titled(member, chat_project, "Fresh")
    stale = titled(member, chat_project, "Stale")
    Session.objects.filter(pk=stale.pk).update(updated_at=timezone.now() - timedelta(hours=3))
    response = signed_in(member).get("/projects/BAL/chat/")
    html = response.content.decode()
    assert re.search(r">just now</time>", html)
    assert re.search(r">3\xa0hours ago</time>", html)


def test_archived_chats_are_listed_apart_and_their_owner_unarchives_one(signed_in, member, chat_project):
    kept = titled(member, chat_project, "Still here")
    gone = titled(member, chat_project, "Put away")
    session_archive(session_id=gone.pk, user=member)
    client = signed_in(member)
    listed = client.get("/projects/BAL/chat/")
    assertContains(listed, "Still here")
    assertNotContains(listed, "Put away")
    assertContains(listed, 'href="/projects/BAL/chat/?archived=1"')
    archived = client.get("/projects/BAL/chat/?archived=1")
    assertContains(archived, "Put away")
    assertNotContains(archived, "Still here")
    assertContains(archived, f'action="{unarchive_url(gone)}"')
    page = client.get(chat_url(gone))
    assertContains(page, f'action="{unarchive_url(gone)}"')

    response = client.post(unarchive_url(gone))
    assert response.status_code == 302
    assert response["Location"] == chat_url(gone)
    assert Session.objects.get(pk=gone.pk).archived_at is None
    assertContains(client.get("/projects/BAL/chat/"), "Put away")
    assertNotContains(client.get(chat_url(gone)), "This chat was archived")
    assert client.post(unarchive_url(kept)).status_code == 302  # not archived: nothing changes
    assert Session.objects.get(pk=kept.pk).archived_at is None


def test_only_the_owner_with_planner_chat_unarchives(signed_in, member, chat_project, users, client):
    gone = titled(member, chat_project, "Put away")
    session_archive(session_id=gone.pk, user=member)
    assert signed_in(users["viewer"]).post(unarchive_url(gone)).status_code == 403
    for name in ("maintainer", "owner", "stranger"):
        assert signed_in(users[name]).post(unarchive_url(gone)).status_code == 404, name
    stranger = UserFactory(username="next-door")
    elsewhere = ProjectFactory(organization=chat_project.organization, key="SIB", name="Sibling")
    MembershipFactory(project=elsewhere, user=stranger, role="owner")
    assert signed_in(stranger).post(f"/projects/SIB/chat/{gone.pk}/unarchive/").status_code == 404
    client.logout()
    assert client.post(unarchive_url(gone)).status_code == 302  # to sign in
    assert signed_in(member).get(unarchive_url(gone)).status_code == 405
    assert Session.objects.get(pk=gone.pk).archived_at is not None
    archived = signed_in(users["maintainer"]).get("/projects/BAL/chat/?archived=1")
    assertNotContains(archived, "Put away")
