"""Where the demo planner answers, the pages say so; the project's settings page, where an owner
sets the credential (docs/architecture.md#the-demo-planner)."""

from __future__ import annotations

import dataclasses

import pytest
from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from planner.domain.services.sessions import session_create
from tests.factories import MembershipFactory, UserFactory
from tracker.models import Membership, Project, Role
from tracker.services.activity import Actor
from tracker.services.projects import project_update
from tracker.trust.crypto import decrypt

NOTICE = "Demo planner: scripted, no AI model. Set a credential to use Claude."
SETTINGS = "/projects/BAL/settings/"
SECRET = "sk-ant-never-shown-0123456789"


@pytest.fixture(autouse=True)
def no_server_key(settings):
    settings.SERVER = dataclasses.replace(settings.SERVER, anthropic_api_key=None)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def credential_of(project: Project) -> str | None:
    return decrypt(Project.objects.get(pk=project.pk).credential_encrypted)


def test_the_chat_pages_say_the_demo_answers_and_link_owners_to_the_credential(project, owner, member):
    chat = session_create(user=owner, project=project)
    for url in (f"/projects/BAL/chat/{chat.pk}/", "/projects/BAL/chat/"):
        page = signed_in(owner).get(url)
        assertContains(page, NOTICE)
        assertContains(page, f'<a href="{SETTINGS}">Set the credential</a>', html=True)
    theirs = signed_in(member).get("/projects/BAL/chat/")
    assertContains(theirs, NOTICE)
    assertContains(theirs, "An owner of BAL sets it")


def test_no_demo_notice_once_a_credential_is_set(project, owner, settings):
    chat = session_create(user=owner, project=project)
    project_update(actor=Actor(user=owner), project=project, credential=SECRET)
    assertNotContains(signed_in(owner).get(f"/projects/BAL/chat/{chat.pk}/"), NOTICE)
    project_update(actor=Actor(user=owner), project=project, credential="")
    settings.SERVER = dataclasses.replace(settings.SERVER, anthropic_api_key="sk-ant-server")
    assertNotContains(signed_in(owner).get(f"/projects/BAL/chat/{chat.pk}/"), NOTICE)


def test_the_notice_shows_wherever_the_demo_is_chosen_even_with_a_credential(project, owner):
    project_update(actor=Actor(user=owner), project=project, credential=SECRET, settings={"provider": "demo"})
    assertContains(signed_in(owner).get("/projects/BAL/chat/"), NOTICE)


def test_only_owners_open_the_settings_page(client, project, users, other_project):
    assert client.get(SETTINGS).status_code == 302  # anonymous: to the login page
    assert client.get(SETTINGS)["Location"] == f"/accounts/login/?next={SETTINGS}"
    page = signed_in(users["owner"]).get(SETTINGS)
    assert page.status_code == 200
    assert "script-src 'self'" in page["Content-Security-Policy"]
    assertContains(page, "No credential is set for BAL.")
    for role in ("maintainer", "member", "viewer"):
        assert signed_in(users[role]).get(SETTINGS).status_code == 403, role
    assert signed_in(users["stranger"]).get(SETTINGS).status_code == 404
    elsewhere = UserFactory(username="elsewhere")
    MembershipFactory(project=other_project, user=elsewhere, role=Role.OWNER)
    assert signed_in(elsewhere).get(SETTINGS).status_code == 404
    owner = signed_in(users["owner"])
    Membership.objects.filter(user=users["owner"]).delete()  # removed a minute ago
    assert owner.get(SETTINGS).status_code == 404


def test_an_owner_sets_the_credential_which_is_never_shown_back(project, owner):
    client = signed_in(owner)
    saved = client.post(SETTINGS, {"credential": f"  {SECRET} "})
    assert (saved.status_code, saved["Location"]) == (302, SETTINGS)
    assert credential_of(project) == SECRET
    page = client.get(SETTINGS)
    assertContains(page, "The credential was saved.")
    assertContains(page, "A credential is set for BAL.")
    assertContains(page, "Its chats are answered by Claude.")
    assertNotContains(page, SECRET)
    assertNotContains(page, SECRET[:12])
    removed = client.post(SETTINGS, {"remove": "on"})
    assert removed.status_code == 302
    assert Project.objects.get(pk=project.pk).credential_encrypted == ""


def test_others_cannot_set_the_credential(client, project, users):
    project_update(actor=Actor(user=users["owner"]), project=project, credential=SECRET)
    assert client.post(SETTINGS, {"credential": "sk-ant-anonymous"}).status_code == 302
    for role in ("maintainer", "member", "viewer"):
        assert signed_in(users[role]).post(SETTINGS, {"credential": "sk-ant-theirs"}).status_code == 403
    assert signed_in(users["stranger"]).post(SETTINGS, {"remove": "on"}).status_code == 404
    assert credential_of(project) == SECRET


def test_the_settings_form_needs_its_csrf_token_and_refuses_bad_input(project, owner):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(owner)
    assert strict.post(SETTINGS, {"credential": SECRET}).status_code == 403
    assert credential_of(project) is None
    client = signed_in(owner)
    empty = client.post(SETTINGS, {"credential": ""})
    assertContains(empty, "Paste a credential", status_code=400)
    too_long = client.post(SETTINGS, {"credential": "x" * 501})
    assertContains(too_long, "at most 500 characters", status_code=400)
    nul = client.post(SETTINGS, {"credential": "sk-\x00"})
    assert nul.status_code == 400
    assert credential_of(project) is None


PLAN = "/projects/BAL/"
DEMO_INVITATION = "This plan is empty, and the demo planner answering here cannot draft one"
CLAUDE_INVITATION = "This plan is empty. Ask the planner in a"


def test_the_plan_page_tells_its_owners_alone_that_the_demo_answers(project, users):
    page = signed_in(users["owner"]).get(PLAN)
    assertContains(page, NOTICE)
    assertContains(page, f'<a href="{SETTINGS}">Set the credential</a>', html=True)
    for role in ("maintainer", "member", "viewer"):
        assertNotContains(signed_in(users[role]).get(PLAN), NOTICE)
    project_update(actor=Actor(user=users["owner"]), project=project, credential=SECRET)
    assertNotContains(signed_in(users["owner"]).get(PLAN), NOTICE)


def test_the_empty_plans_invitation_asks_the_demo_only_what_it_can_do(project, users):
    owner = signed_in(users["owner"]).get(PLAN)
    assertContains(owner, DEMO_INVITATION)
    assertContains(owner, "add a ticket for …")
    assertContains(owner, '<a href="#quick-create">New ticket</a>', html=True)
    assertContains(owner, '<a href="/projects/BAL/chat/">chat</a>', html=True)
    assertNotContains(owner, "draft one.")
    viewer = signed_in(users["viewer"]).get(PLAN)  # neither writes nor chats: offered neither
    assertContains(viewer, '<p class="empty" id="empty-plan">This plan is empty.</p>', html=True)
    project_update(actor=Actor(user=users["owner"]), project=project, credential=SECRET)
    claude = signed_in(users["owner"]).get(PLAN)
    assertContains(claude, CLAUDE_INVITATION)
    assertContains(claude, '<a href="/projects/BAL/chat/">chat</a> to draft one.')
    assertNotContains(claude, DEMO_INVITATION)
