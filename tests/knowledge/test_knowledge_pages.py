"""Knowledge pages where members write: Markdown rendered safely with item keys linked only where
the reader may open them, a new entry from the list, an edit at the version read, a stale edit's
conflict (nothing saved, the user's text kept), and no form nor write for readers."""

from __future__ import annotations

import pytest
from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from knowledge.models import KnowledgeEntry
from knowledge.services import knowledge_create, knowledge_update
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tracker.models import Role
from tracker.services.activity import Actor

LIST = "/projects/BAL/knowledge/"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def url(entry: KnowledgeEntry) -> str:
    return f"{LIST}{entry.pk}/"


@pytest.fixture
def side(project, owner):
    """A second project of the organization, where only the owner is a member."""
    side = ProjectFactory(organization=project.organization, key="SID", name="Side")
    MembershipFactory(project=side, user=owner, role=Role.OWNER)
    return side


@pytest.fixture
def entry(project, member, indexed):
    with indexed():
        return knowledge_create(
            actor=Actor(user=member),
            kind="note",
            title="Release notes",
            body="First text.",
            projects=[project],
        )


def test_the_body_and_revisions_are_rendered_markdown(project, member, make_item, indexed):
    ticket = make_item(title="Ticket")
    body = f"# Heading\n\n**bold** and {ticket.key} and <script>alert(1)</script>"
    with indexed():
        entry = knowledge_create(
            actor=Actor(user=member), kind="note", title="T", body=body, projects=[project]
        )
        knowledge_update(actor=Actor(user=member), entry=entry, version=1, fields={"body": "*second*"})
    page = signed_in(member).get(url(entry))
    assert page.status_code == 200
    assertContains(page, "<em>second</em>", html=True)
    assertContains(page, "<h1>Heading</h1>", html=True)  # version 1, in its fold
    assertContains(page, "<strong>bold</strong>", html=True)
    assertContains(page, f'<a href="/projects/BAL/items/{ticket.key}/">{ticket.key}</a>', html=True)
    assertContains(page, "&lt;script&gt;alert(1)&lt;/script&gt;")
    assertNotContains(page, "<script>alert(1)")
    assertNotContains(page, "&lt;h1&gt;")


def test_only_keys_of_projects_the_reader_reads_become_links(
    project, side, member, owner, make_item, indexed
):
    hidden = make_item(title="Secret", target=side)
    with indexed():
        entry = knowledge_create(
            actor=Actor(user=member),
            kind="note",
            title="T",
            body=f"See {hidden.key} and BAL-999.",
            projects=[project],
        )
    page = signed_in(member).get(url(entry))
    assertContains(page, f"See {hidden.key} and BAL-999.")
    assertNotContains(page, f"/items/{hidden.key}/")
    assertContains(
        signed_in(owner).get(url(entry)), f'<a href="/projects/SID/items/{hidden.key}/">', html=False
    )


def test_a_member_writes_an_entry(project, member):
    client = signed_in(member)
    assertContains(client.get(LIST), "New entry")
    response = client.post(
        LIST, {"kind": "decision", "title": " Use SQLite ", "body": "**Because** it is simple."}
    )
    assert response.status_code == 302
    entry = KnowledgeEntry.objects.get()
    assert response["Location"] == url(entry)
    assert (entry.kind, entry.title, entry.author, entry.version) == ("decision", "Use SQLite", member, 1)
    assert [p.key for p in entry.projects.all()] == ["BAL"]
    page = client.get(url(entry))
    assertContains(page, "The entry was written.")
    assertContains(page, "<strong>Because</strong>", html=True)


def test_an_owner_links_a_new_entry_to_another_project_too(project, side, owner, member):
    assertNotContains(signed_in(member).get(LIST), 'value="SID"')
    response = signed_in(owner).post(LIST, {"kind": "note", "title": "Both", "projects": ["SID"]})
    assert response.status_code == 302
    assert sorted(p.key for p in KnowledgeEntry.objects.get().projects.all()) == ["BAL", "SID"]
    # the member cannot link SID, which they cannot read
    refused = signed_in(member).post(LIST, {"kind": "note", "title": "Sneaky", "projects": ["SID"]})
    assertContains(refused, "Unknown project", status_code=400)
    assert KnowledgeEntry.objects.count() == 1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "essay", "title": "T"}, "Expected one of: document, decision, note, debt."),
        ({"kind": "note", "title": "  "}, "Expected a non-empty string."),
        ({"kind": "note", "title": "x" * 201}, "At most 200 characters."),
        ({"kind": "note", "title": "T", "body": "x" * 200_001}, "At most 200000 characters."),
        ({"kind": "note", "title": "T\x00"}, "NUL"),
        ({"kind": "note", "title": "T", "body": "b\x00"}, "NUL"),
    ],
)
def test_a_bad_new_entry_is_explained_and_not_written(project, member, fields, message):
    response = signed_in(member).post(LIST, fields)
    assertContains(response, message, status_code=400)
    assertContains(response, "The entry was not written", status_code=400)
    assert not KnowledgeEntry.objects.exists()


def test_a_member_edits_an_entry(entry, member):
    client = signed_in(member)
    page = client.get(url(entry))
    assertContains(page, "Edit this entry")
    assertContains(page, 'class="stacked entry-form"')
    assertContains(page, '<input type="hidden" name="version" value="1">', html=True)
    saved = client.post(
        url(entry), {"version": "1", "kind": "decision", "title": "Renamed", "body": "## New"}
    )
    assert (saved.status_code, saved["Location"]) == (302, url(entry))
    entry.refresh_from_db()
    assert (entry.version, entry.kind, entry.title, entry.body) == (2, "decision", "Renamed", "## New")
    page = client.get(url(entry))
    assertContains(page, "<h2>New</h2>", html=True)
    assertContains(page, "Revisions (2)")


def test_a_stale_edit_shows_the_conflict_and_keeps_the_users_text(entry, member, owner):
    knowledge_update(actor=Actor(user=owner), entry=entry, version=1, fields={"body": "The owner's text."})
    client = signed_in(member)
    stale = client.post(
        url(entry), {"version": "1", "kind": "note", "title": "Mine", "body": "My own words."}
    )
    assert stale.status_code == 409
    assertContains(stale, "you sent version 1, it is now at version 2", status_code=409)
    assertContains(stale, "The owner&#x27;s text.", status_code=409)  # the current text
    assertContains(stale, ">My own words.</textarea>", status_code=409)  # the user's, kept
    assertContains(stale, 'name="version" value="2"', status_code=409)
    entry.refresh_from_db()
    assert (entry.version, entry.title, entry.body) == (2, "Release notes", "The owner's text.")
    again = client.post(
        url(entry), {"version": "2", "kind": "note", "title": "Mine", "body": "My own words."}
    )
    assert again.status_code == 302
    entry.refresh_from_db()
    assert (entry.version, entry.body) == (3, "My own words.")


@pytest.mark.parametrize(
    ("fields", "message", "status"),
    [
        ({"version": "x", "kind": "note", "title": "T"}, "Send the version you read (an integer).", 400),
        ({"version": "1", "kind": "note", "title": ""}, "Expected a non-empty string.", 400),
        ({"version": "1", "kind": "note", "title": "T", "body": "\x00"}, "NUL", 400),
        ({"version": "99999999999999999999", "kind": "note", "title": "T"}, "Send the version you read", 400),
    ],
)
def test_a_bad_edit_saves_nothing(entry, member, fields, message, status):
    response = signed_in(member).post(url(entry), fields)
    assertContains(response, message, status_code=status)
    entry.refresh_from_db()
    assert (entry.version, entry.title) == (1, "Release notes")


def test_a_viewer_sees_no_form_and_cannot_write(entry, viewer):
    client = signed_in(viewer)
    for page in (client.get(LIST), client.get(url(entry))):
        assert page.status_code == 200
        assertNotContains(page, "entry-form")
        assertNotContains(page, "New entry")
        assertNotContains(page, "Edit this entry")
    assert client.post(LIST, {"kind": "note", "title": "No"}).status_code == 403
    assert client.post(url(entry), {"version": "1", "kind": "note", "title": "No"}).status_code == 403
    entry.refresh_from_db()
    assert (KnowledgeEntry.objects.count(), entry.title) == (1, "Release notes")


def test_another_organizations_member_and_strangers_get_404(entry, users, other_project):
    elsewhere = UserFactory(username="elsewhere")
    MembershipFactory(project=other_project, user=elsewhere, role=Role.OWNER)
    for user in (elsewhere, users["stranger"]):
        client = signed_in(user)
        assert client.get(LIST).status_code == 404
        assert client.post(LIST, {"kind": "note", "title": "X"}).status_code == 404
        assert client.post(url(entry), {"version": "1", "kind": "note", "title": "X"}).status_code == 404
    assert KnowledgeEntry.objects.count() == 1


def test_the_forms_need_their_csrf_token_and_carry_the_csp(entry, member):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(member)
    assert strict.post(LIST, {"kind": "note", "title": "X"}).status_code == 403
    assert strict.post(url(entry), {"version": "1", "kind": "note", "title": "X"}).status_code == 403
    assert KnowledgeEntry.objects.count() == 1
    page = signed_in(member).get(url(entry))
    assert "script-src 'self'" in page["Content-Security-Policy"]


def test_the_list_search_and_kind_filter_still_work_with_the_form(entry, member):
    client = signed_in(member)
    assertContains(client.get(f"{LIST}?kind=note&q=Release"), "Release notes")
    assertNotContains(client.get(f"{LIST}?kind=decision"), "Release notes")
