"""A ticket's comments on its page: the list rendered as safe Markdown, the form and the watch
toggle for those who may use them, posts that go back to the comment, refused input that stores
nothing and says why."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from tests.factories import make_membership, make_project
from tracker.comment_selectors import MAX_BODY
from tracker.models import Comment, Watch
from tracker.services.activity import Actor
from tracker.services.comments import comment_add


@pytest.fixture
def ticket(make_item):
    return make_item(title="Login form", state="ready")


def page_of(item: Any) -> str:
    return f"/projects/{item.project.key}/items/{item.key}/"


def signed_in(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


def comments_section(response: Any) -> str:
    html = response.content.decode()
    start = html.index('class="comments"')
    return html[start : html.index("</section>", start)]


def test_comments_are_rendered_as_safe_markdown(client: Client, member, viewer, owner, ticket, make_item):
    other = make_item(title="Other")
    comment = comment_add(
        actor=Actor(user=member),
        item=ticket,
        body=f"**bold** see {other.key}, @owner\n\n<script>alert('x')</script>\n\n[x](javascript:alert(1))",
    )

    response = signed_in(client, viewer).get(page_of(ticket))

    assert response.status_code == 200
    assert "Content-Security-Policy" in response
    section = comments_section(response)
    assert f'id="comment-{comment.pk}"' in section
    assert "<strong>bold</strong>" in section
    assert f'<a href="/projects/BAL/items/{other.key}/">{other.key}</a>' in section
    assert '<span class="mention">@owner</span>' in section
    assert "<script>" not in section
    assert "&lt;script&gt;" in section  # shown as text
    assert 'href="javascript' not in section
    assert "<strong>member</strong>" in section  # the author


def test_a_member_sees_the_form_and_a_viewer_only_the_watch_toggle(client: Client, member, viewer, ticket):
    as_member = comments_section(signed_in(client, member).get(page_of(ticket)))
    assert '<label for="comment-body">' in as_member
    assert '<textarea id="comment-body" name="body"' in as_member
    assert ">Comment</button>" in as_member
    assert f"Watch {ticket.key}</button>" in as_member

    as_viewer = comments_section(signed_in(Client(), viewer).get(page_of(ticket)))
    assert "comment-body" not in as_viewer
    assert ">Comment</button>" not in as_viewer
    assert f"Watch {ticket.key}</button>" in as_viewer
    assert "No comments yet." in as_viewer


def test_posting_a_comment_goes_back_to_it_with_a_message(client: Client, member, ticket):
    signed_in(client, member)

    response = client.post(f"{page_of(ticket)}comments/", {"body": "Done **soon**"})

    comment = Comment.objects.get()
    assert (comment.author, comment.body) == (member, "Done **soon**")
    assert response.status_code == 302
    assert response["Location"] == f"{page_of(ticket)}#comment-{comment.pk}"
    shown = client.get(response["Location"])
    assertContains(shown, f"Your comment on {ticket.key} was added.")
    assertContains(shown, "Done <strong>soon</strong>")


@pytest.mark.parametrize(
    ("body", "message"),
    [("   ", "may not be empty"), ("y" * (MAX_BODY + 1), f"At most {MAX_BODY} characters")],
)
def test_a_refused_comment_stores_nothing_and_says_why(client: Client, member, ticket, body, message):
    signed_in(client, member)

    response = client.post(f"{page_of(ticket)}comments/", {"body": body})

    assert response.status_code == 302
    assert response["Location"] == f"{page_of(ticket)}#comment-form"
    assert not Comment.objects.exists()
    shown = client.get(response["Location"])
    assertContains(shown, "Your comment was not saved:")
    assertContains(shown, message)
    if body.strip():  # the writer gets their text back to shorten it
        assertContains(shown, body[:100])
    again = client.get(page_of(ticket))  # once
    assertNotContains(again, "Your comment was not saved:")


def test_a_viewer_may_not_post_a_comment(client: Client, viewer, ticket):
    response = signed_in(client, viewer).post(f"{page_of(ticket)}comments/", {"body": "Me too"})

    assert response.status_code == 403
    assert not Comment.objects.exists()


def test_another_projects_member_gets_404_everywhere(client: Client, org, ticket):
    neighbour = make_project(organization=org, key="NEXT")
    outsider = make_membership(project=neighbour).user
    signed_in(client, outsider)

    assert client.post(f"{page_of(ticket)}comments/", {"body": "Hi"}).status_code == 404
    assert client.post(f"{page_of(ticket)}watch/", {"watch": "on"}).status_code == 404
    assert client.post("/projects/BAL/items/BAL-999/comments/", {"body": "Hi"}).status_code == 404
    assert not Comment.objects.exists()
    assert not Watch.objects.exists()


def test_watch_and_unwatch_from_the_page(client: Client, viewer, ticket):
    signed_in(client, viewer)

    watched = client.post(f"{page_of(ticket)}watch/", {"watch": "on"})
    assert watched.status_code == 302
    assert Watch.objects.filter(user=viewer, item=ticket).exists()
    shown = client.get(page_of(ticket))
    assertContains(shown, f"You watch {ticket.key}.")
    assertContains(shown, f"Unwatch {ticket.key}</button>")

    client.post(f"{page_of(ticket)}watch/", {"watch": "off"})
    assert not Watch.objects.exists()
    assert client.post(f"{page_of(ticket)}watch/", {"watch": "maybe"}).status_code == 302
    assert not Watch.objects.exists()


def test_get_is_not_allowed_on_the_post_addresses(client: Client, member, ticket):
    signed_in(client, member)
    assert client.get(f"{page_of(ticket)}comments/").status_code == 405
    assert client.get(f"{page_of(ticket)}watch/").status_code == 405
