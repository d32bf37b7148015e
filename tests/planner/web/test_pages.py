"""The planner's pages: a project's chat list, opening a chat, the chat page shell and its CSP."""

from __future__ import annotations

import re

from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from planner.domain.services.sessions import session_begin, session_create
from planner.models import Session
from tests.factories import MembershipFactory, UserFactory
from tests.planner.conftest import chat_url

NEW_CHAT = '<button type="submit" class="new-chat">New chat</button>'


def test_anonymous_visitors_are_sent_to_sign_in(client: Client, session):
    for url in ["/projects/BAL/chat/", chat_url(session)]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"] == f"/accounts/login/?next={url}"
    assert client.post("/projects/BAL/chat/").status_code == 302
    assert Session.objects.count() == 1


def test_member_sees_their_chats_and_a_new_chat_button(signed_in, session, owner, chat_project):
    session.title = "Plan the export"
    session.save()
    session_create(user=owner, project=chat_project, title="The owner's own chat")
    response = signed_in(session.user).get("/projects/BAL/chat/")
    assertContains(response, "Plan the export")
    assertContains(response, f'href="{chat_url(session)}"')
    assertContains(response, '<span class="badge state-idle">Idle</span>', html=True)
    assertNotContains(response, "The owner's own chat")
    assertContains(response, NEW_CHAT, html=True)
    assertContains(response, "csrfmiddlewaretoken")


def test_the_chat_list_shows_each_sub_chat_under_the_chat_that_started_it(signed_in, session, chat_project):
    session.title = "Replan payments"
    session.save()
    children = [
        Session.objects.create(project=chat_project, user=session.user, parent=session, title=title)
        for title in ("Payments: tickets", "Payments: knowledge")
    ]
    page = signed_in(session.user).get("/projects/BAL/chat/").content.decode()
    nested = re.search(
        r'<ul class="session-list subchat-list" aria-label="([^"]*)">(.*?)</ul>', page, re.DOTALL
    )
    assert nested is not None
    assert nested.group(1) == "Sub-chats the planner started in “Replan payments”"
    assert [chat_url(child) in nested.group(2) for child in children] == [True, True]
    assert nested.group(2).count("Sub-chat the planner started") == 2
    assert page.count(f'href="{chat_url(children[0])}"') == 1  # under its parent only


def test_the_home_page_links_to_each_projects_chats(signed_in, member, project):
    assertContains(signed_in(member).get("/"), 'href="/projects/BAL/chat/"')


def test_a_project_the_user_cannot_read_does_not_exist(signed_in, member, other_project):
    client = signed_in(member)
    other = session_create(user=other_project_owner(other_project), project=other_project)
    assert client.get("/projects/OTH/chat/").status_code == 404
    assert client.get("/projects/NOPE/chat/").status_code == 404
    assert client.post("/projects/OTH/chat/").status_code == 404
    assert client.get(chat_url(other)).status_code == 404
    assert Session.objects.filter(project=other_project).count() == 1


def other_project_owner(project):
    user = UserFactory(username="other-owner")
    MembershipFactory(project=project, user=user, role="owner")
    return user


def test_a_viewer_reads_but_cannot_open_a_chat(signed_in, viewer, project):
    client = signed_in(viewer)
    response = client.get("/projects/BAL/chat/")
    assert response.status_code == 200
    assertNotContains(response, "New chat</button>")
    assertContains(response, "you need the planner.chat permission")
    assert client.post("/projects/BAL/chat/").status_code == 403
    assert not Session.objects.exists()


def test_new_chat_opens_a_session_and_redirects_to_it(signed_in, member, chat_project):
    response = signed_in(member).post("/projects/BAL/chat/")
    session = Session.objects.get()
    assert (session.user, session.project, session.state) == (member, chat_project, "idle")
    assert response.status_code == 302
    assert response["Location"] == chat_url(session)


def test_new_chat_needs_the_csrf_token(member, project):
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)
    assert client.post("/projects/BAL/chat/").status_code == 403
    assert not Session.objects.exists()
    token = client.get("/projects/BAL/chat/").context["csrf_token"]
    assert client.post("/projects/BAL/chat/", {"csrfmiddlewaretoken": token}).status_code == 302
    assert Session.objects.count() == 1


def test_the_chat_page_is_a_shell_for_chat_js(signed_in, session):
    response = signed_in(session.user).get(chat_url(session))
    assert response.status_code == 200
    assertContains(response, f'data-session="{session.pk}"')
    assertContains(response, 'data-project="BAL"')
    assertContains(response, 'data-state="idle"')
    assertContains(response, f'data-api-url="/api/v1/planner/sessions/{session.pk}"')
    assertContains(response, f'data-ws-path="/ws/planner/sessions/{session.pk}/"')
    assertContains(response, 'data-can-chat="true"')
    assertContains(response, '<script src="/static/planner/chat.js" defer></script>', html=False)
    assertContains(response, '<label for="composer-input" class="visually-hidden">')
    assertContains(response, 'id="stop-button"')
    assertContains(response, 'role="log" aria-live="polite"')
    assertContains(response, '<h1 id="chat-title">New chat</h1>', html=False)


def test_the_chat_pages_forbid_inline_scripts_and_styles(signed_in, session):
    client = signed_in(session.user)
    for url in [chat_url(session), "/projects/BAL/chat/"]:
        policy = client.get(url)["Content-Security-Policy"]
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
        assert directives["script-src"] == "'self'"
        assert directives["style-src"] == "'self'"
        assert directives["default-src"] == "'none'"
        assert directives["frame-ancestors"] == "'none'"
        assert "ws://testserver" in directives["connect-src"]
        assert "unsafe" not in policy


def test_the_page_carries_no_inline_script_and_escapes_the_title(signed_in, session, member):
    text = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
    session_begin(session_id=session.pk, user=member, text=text)
    response = signed_in(member).get(chat_url(session))
    html = response.content.decode()
    scripts = re.findall(r"<script\b[^>]*>", html)
    # Only this site's own files; the owner's page also loads the rename and archive controls; the
    # recent chats' fold (chat_nav.js) comes last. Every page first loads its keyboard shortcuts and
    # live filters (keys.js), the graph's zoom (graph.js) and the inbox count, from base.html.
    assert scripts == [
        '<script src="/static/tracker/keys.js" defer>',
        '<script src="/static/tracker/graph.js" defer>',
        '<script src="/static/planner/inbox_count.js" defer>',
        '<script src="/static/planner/vendor/markdown-it.min.js" defer>',
        '<script src="/static/planner/vendor/highlight.min.js" defer>',
        '<script src="/static/planner/markdown.js" defer>',
        '<script src="/static/planner/refs.js" defer>',
        '<script src="/static/planner/chat_knowledge.js" defer>',
        '<script src="/static/planner/chat.js" defer>',
        '<script src="/static/planner/chat_manage.js" defer>',
        '<script src="/static/planner/chat_nav.js" defer>',
    ]
    assert "<img" not in html
    assert "onerror=" not in html.replace("onerror=&quot;", "")
    assertContains(response, "&lt;script&gt;window.__pwned=1&lt;/script&gt;")
    assertContains(response, 'data-state="running"')


def test_someone_elses_chat_does_not_exist(signed_in, session, owner, users):
    assert signed_in(owner).get(chat_url(session)).status_code == 404
    assert signed_in(users["stranger"]).get(chat_url(session)).status_code == 404


def test_a_chat_is_found_only_under_its_own_project(signed_in, session, member, other_project):
    MembershipFactory(project=other_project, user=member, role="member")
    client = signed_in(member)
    assert client.get(f"/projects/OTH/chat/{session.pk}/").status_code == 404
    assert client.get("/projects/BAL/chat/not-a-uuid/").status_code == 404
    assert client.get(chat_url(session)).status_code == 200


def test_a_demoted_member_reads_their_chat_without_a_composer(signed_in, session, member):
    member.memberships.update(role="viewer")
    response = signed_in(member).get(chat_url(session))
    assert response.status_code == 200
    assertContains(response, 'data-can-chat="false"')
    assertNotContains(response, 'id="composer"')
    assertContains(response, "You can read this chat but not write in it")


def test_only_get_and_post_are_allowed(signed_in, session):
    client = signed_in(session.user)
    assert client.delete("/projects/BAL/chat/").status_code == 405
    assert client.post(chat_url(session)).status_code == 405
