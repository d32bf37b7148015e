"""Pages: the home page's project list, the login page, logging out."""

from __future__ import annotations

from io import StringIO

from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from tracker.models import Dependency, Project
from tracker.selectors import runnable_tickets
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose


def fact(label: str, value: object) -> str:
    return f"<dt>{label}</dt><dd>{value}</dd>"


def test_anonymous_home_redirects_to_login(client: Client, db):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"


def test_member_sees_their_project_and_not_anothers(client: Client, project, other_project, member):
    client.force_login(member)
    response = client.get("/")
    assertContains(response, "BAL</span> Ballet")
    assertContains(response, fact("Organization", "Acme"))
    assertContains(response, fact("Your role", "member"))
    assertContains(response, "/api/v1/projects/BAL/")
    assertNotContains(response, "OTH")
    assertNotContains(response, "Other project")


def test_counts_open_and_runnable_tickets_and_proposed_changesets(client: Client, project, member, make_item):
    done = make_item(title="Shipped", state="done")
    make_item(title="Cancelled", state="cancelled")
    make_item(title="Free", state="ready")
    waiting = make_item(title="Waiting", state="ready")
    busy = make_item(title="Busy", state="in_progress")
    make_item(kind="epic", title="Epic", state="open")
    Dependency.objects.create(blocker=busy, blocked=waiting)
    Dependency.objects.create(blocker=done, blocked=busy)
    changeset_propose(
        actor=Actor(user=member),
        project=project,
        title="Polish",
        operations=[{"op": "create", "kind": "ticket", "fields": {"title": "New"}}],
    )
    client.force_login(member)
    response = client.get("/")
    assertContains(response, fact("Open tickets", 3))
    assertContains(response, fact("Runnable", 1))
    assertContains(response, fact("Awaiting review", "1 changeset"))


def test_review_link_leads_staff_to_the_projects_review_page(client: Client, project, owner):
    owner.is_staff = True
    owner.save()
    client.force_login(owner)
    response = client.get("/")
    assertContains(response, 'href="/projects/BAL/changesets/"')
    assertContains(response, 'href="/admin/"')


def test_no_review_link_for_non_staff(client: Client, project, viewer):
    client.force_login(viewer)
    response = client.get("/")
    assertContains(response, fact("Your role", "viewer"))
    assertNotContains(response, "/admin/")


def test_user_without_projects_is_told_so(client: Client, users):
    client.force_login(users["stranger"])
    response = client.get("/")
    assertContains(response, "You are not a member of any project yet.")


def test_superuser_sees_every_project(client: Client, project, other_project):
    admin = User.objects.create_superuser(username="root", password="pw-for-tests")
    client.force_login(admin)
    response = client.get("/")
    assertContains(response, "BAL</span> Ballet")
    assertContains(response, "OTH</span> Other project")
    assertContains(response, fact("Your role", "superuser"))


def test_header_names_the_user_with_a_post_logout_form(client: Client, member):
    client.force_login(member)
    response = client.get("/")
    assertContains(response, "Signed in as <strong>member</strong>")
    assertContains(response, '<form method="post" action="/accounts/logout/"')
    assertContains(response, "csrfmiddlewaretoken")
    assertContains(response, 'href="#main"')


def test_login_page_renders_a_labelled_form(client: Client, db):
    response = client.get("/accounts/login/?next=/")
    assertContains(response, '<h1 id="login-title">Sign in</h1>', html=False)
    assertContains(response, 'autocomplete="current-password"')
    assertContains(response, '<label for="id_username">Username</label>', html=True)
    assertContains(response, "/static/tracker/ballet.css")
    assertNotContains(response, "Log out")


def test_login_with_the_right_password_lands_on_the_projects(client: Client, project, member):
    response = client.post(
        "/accounts/login/", {"username": "member", "password": "pw-for-tests", "next": "/"}, follow=True
    )
    assert response.redirect_chain[-1][0] == "/"
    assertContains(response, "BAL</span> Ballet")


def test_login_with_a_wrong_password_shows_an_error(client: Client, member):
    response = client.post("/accounts/login/", {"username": "member", "password": "nope"})
    assert response.status_code == 200
    assertContains(response, 'role="alert"')
    assertContains(response, "enter a correct username and password")


def test_logout_by_post_signs_out(client: Client, member):
    client.force_login(member)
    response = client.post("/accounts/logout/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/"
    assert client.get("/").status_code == 302


def test_logout_by_get_is_refused(client: Client, member):
    client.force_login(member)
    assert client.get("/accounts/logout/").status_code == 405
    assert client.get("/").status_code == 200


def test_seeded_demo_owner_sees_the_demo_project(client: Client, db):
    call_command("seed_demo", "--password", "demo-pass-for-tests", stdout=StringIO())
    demo = Project.objects.get(key="DEMO")
    assert client.login(username="demo", password="demo-pass-for-tests")
    response = client.get("/")
    assertContains(response, "DEMO</span> Courtside")
    assertContains(response, fact("Your role", "owner"))
    assertContains(response, fact("Runnable", runnable_tickets(project=demo).count()))
    assertContains(response, fact("Awaiting review", "1 changeset"))
    assertContains(response, f'href="/projects/{demo.key}/changesets/"')
