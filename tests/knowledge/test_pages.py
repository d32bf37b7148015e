"""Knowledge pages: a project's entries by kind and by search, an entry with its links and
revisions, visibility as docs/domain.md#knowledge defines it, bad input and hostile text."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from knowledge.services import knowledge_create, knowledge_update
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tracker.models import Role
from tracker.services.activity import Actor

HOSTILE = '<script>alert("x")</script>'
LIST = "/projects/BAL/knowledge/"


def entry_url(entry) -> str:
    return f"{LIST}{entry.pk}/"


@pytest.fixture
def side(project):
    """A second project of the organization, where only the owner is a member."""
    return ProjectFactory(organization=project.organization, key="SID", name="Side")


@pytest.fixture
def entries(project, side, other_project, users, make_item, indexed):
    """A decision linked to BAL-1; a note linked to BAL and SID (which the member cannot read); a
    document of another organization; the decision edited once."""
    owner = users["owner"]
    MembershipFactory(project=side, user=owner, role=Role.OWNER)
    ticket = make_item(title="Ticket")
    with indexed():
        decision = knowledge_create(
            actor=Actor(user=users["member"]),
            kind="decision",
            title="Use SQLite in embedded mode",
            body="We decided on SQLite.\n\nIt needs no server.",
            projects=[project],
            items=[ticket],
        )
        decision = knowledge_update(
            actor=Actor(user=owner),
            entry=decision,
            version=1,
            fields={"body": "We decided on SQLite, embedded.\n\nIt needs no server."},
        )
        shared = knowledge_create(
            actor=Actor(user=owner), kind="note", title="Shared with Side", projects=[project, side]
        )
        root = User.objects.create(username="root", is_superuser=True)
        foreign = knowledge_create(
            actor=Actor(user=root), kind="document", title="Other org doc", projects=[other_project]
        )
    return {"decision": decision, "shared": shared, "foreign": foreign, "ticket": ticket}


def signed_in(client: Client, user) -> Client:
    client.force_login(user)
    return client


def test_the_list_shows_what_the_reader_may_read_with_counts(client, users, entries):
    response = signed_in(client, users["viewer"]).get(LIST)
    assert response.status_code == 200
    assertContains(response, "Use SQLite in embedded mode")
    assertContains(response, f'href="{entry_url(entries["decision"])}"')
    assertContains(response, "1 entry.")
    assertContains(response, "All (1)")
    assertContains(response, "Decision (1)")
    assertContains(response, "Note (0)")
    assertNotContains(response, "Shared with Side")  # also linked to SID, which the viewer cannot read
    assertNotContains(response, "Other org doc")
    assert response["Content-Security-Policy"].startswith("default-src 'none'")


def test_one_who_reads_every_linked_project_sees_the_shared_entry(client, users, entries):
    response = signed_in(client, users["owner"]).get(LIST)
    assertContains(response, "Shared with Side")
    assertContains(response, "2 entries.")
    assert signed_in(Client(), users["owner"]).get(entry_url(entries["shared"])).status_code == 200


def test_the_list_filters_by_kind(client, users, entries):
    client = signed_in(client, users["owner"])
    response = client.get(f"{LIST}?kind=note")
    assertContains(response, "Shared with Side")
    assertNotContains(response, "Use SQLite")
    assertContains(response, "<h1>Knowledge: Note</h1>", html=True)
    assertContains(response, 'aria-current="page">Note (1)')


def test_the_list_searches(client, users, entries):
    client = signed_in(client, users["member"])
    response = client.get(f"{LIST}?q=SQLite")
    assertContains(response, "Use SQLite in embedded mode")
    assertContains(response, "answering “SQLite”")
    response = client.get(f"{LIST}?q=Side")
    assertNotContains(response, "Shared with Side")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("kind=bogus", "Unknown kind. Choose one of: document, decision, note, debt."),
        ("q=a%00b", "A search is at most 200 characters of text."),
        ("q=" + "x" * 201, "A search is at most 200 characters of text."),
    ],
)
def test_bad_params_are_explained(client, users, entries, query, message):
    response = signed_in(client, users["member"]).get(f"{LIST}?{query}")
    assertContains(response, message, status_code=400)
    assertContains(response, "Use SQLite in embedded mode", status_code=400)


def test_an_entry_shows_its_body_escaped_its_links_and_revisions(client, users, entries):
    response = signed_in(client, users["viewer"]).get(entry_url(entries["decision"]))
    assert response.status_code == 200
    assertContains(response, "Use SQLite in embedded mode")
    assertContains(response, "<p>We decided on SQLite, embedded.</p>", html=True)
    assertContains(
        response,
        f'<a href="/projects/BAL/items/{entries["ticket"].key}/">{entries["ticket"].key}</a>',
        html=True,
    )
    assertContains(response, "Revisions (2)")
    assertContains(response, "Version 2 by owner")
    assertContains(response, "Version 1 by member")
    assertContains(response, "<p>We decided on SQLite.</p>", html=True)  # version 1's body, in its fold


def test_an_entry_the_reader_may_not_read_is_404(client, users, entries):
    client = signed_in(client, users["member"])
    assert client.get(entry_url(entries["shared"])).status_code == 404
    assert client.get(entry_url(entries["foreign"])).status_code == 404


def test_a_member_of_another_project_gets_404(client, project, entries):
    outsider = UserFactory(username="outsider")
    MembershipFactory(
        project=ProjectFactory(organization=project.organization, key="ELS"), user=outsider, role=Role.OWNER
    )
    client = signed_in(client, outsider)
    assert client.get(LIST).status_code == 404
    assert client.get(entry_url(entries["decision"])).status_code == 404
    # Through a project they read, an entry linked to one they cannot is as unknown.
    assert client.get(f"/projects/ELS/knowledge/{entries['decision'].pk}/").status_code == 404


def test_anonymous_is_sent_to_log_in(client, entries):
    response = client.get(LIST)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("entry_id", [0, 999_999, 2**63, 10**30])
def test_an_id_out_of_range_is_404(client, users, entries, entry_id):
    assert signed_in(client, users["member"]).get(f"{LIST}{entry_id}/").status_code == 404


def test_hostile_text_is_escaped(client, project, users, indexed):
    with indexed():
        entry = knowledge_create(
            actor=Actor(user=users["member"]),
            kind="note",
            title=f"Title {HOSTILE}",
            body=f"**Bold** {HOSTILE} [x](javascript:alert(1))",
            projects=[project],
        )
    client = signed_in(client, users["member"])
    for url in (LIST, entry_url(entry)):
        response = client.get(url)
        assertContains(response, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;")
        assertNotContains(response, HOSTILE)
        assertNotContains(response, 'href="javascript:')


def test_the_home_page_links_to_the_knowledge(client, users, project):
    assertContains(signed_in(client, users["viewer"]).get("/"), f'href="{LIST}"')


def test_the_list_and_an_entry_lead_back_to_the_plan(client, users, entries):
    for url in (LIST, entry_url(entries["decision"])):
        html = signed_in(client, users["viewer"]).get(url).content.decode()
        start = html.index('<nav class="crumbs"')
        crumbs = html[start : html.index("</nav>", start)]
        assert '<a href="/projects/BAL/"><span class="key">BAL</span>' in crumbs, url
