"""An item's comments and watching it over REST: what a comment reads as, who may write one, API
key scopes, bad input answered 400 with nothing stored, and another project's members told 404."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.factories import make_key, make_membership, make_project
from tracker.comment_selectors import MAX_BODY
from tracker.models import Comment, Notice, Watch
from tracker.services.activity import Actor
from tracker.services.comments import comment_add

BAL = "/api/v1/projects/BAL/"


@pytest.fixture
def ticket(make_item):
    return make_item(title="Login form", state="ready")


def comments_url(item: Any) -> str:
    return f"{BAL}items/{item.key}/comments/"


def watch_url(item: Any) -> str:
    return f"{BAL}items/{item.key}/watch/"


def bearer(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def test_a_member_comments_and_gets_the_comment_back(member, owner, ticket, make_item, client_for):
    other = make_item(title="Other")
    body = f"**Blocked** on {other.key} and BAL-999, ask @owner <script>alert(1)</script>"

    response = client_for(member).post(comments_url(ticket), {"body": f"  {body}\n"}, format="json")

    assert response.status_code == 201, response.content
    answer = response.json()
    comment = Comment.objects.get()
    assert answer["id"] == comment.pk
    assert (answer["author"], answer["body"], answer["mentions"]) == ("member", body, ["owner"])
    html = answer["body_html"]
    assert "<strong>Blocked</strong>" in html
    assert f'<a href="/projects/BAL/items/{other.key}/">{other.key}</a>' in html
    assert "BAL-999" in html
    assert "/items/BAL-999/" not in html
    assert '<span class="mention">@owner</span>' in html
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert answer["created_at"]
    assert Notice.objects.filter(user=owner, kind="mention").count() == 1


def test_comments_are_listed_oldest_first_and_paginated(member, viewer, ticket, client_for):
    for n in range(3):
        comment_add(actor=Actor(user=member), item=ticket, body=f"Comment {n}")

    response = client_for(viewer).get(comments_url(ticket))

    assert response.status_code == 200
    page = response.json()
    assert page["count"] == 3
    assert [c["body"] for c in page["results"]] == ["Comment 0", "Comment 1", "Comment 2"]
    assert set(page["results"][0]) == {"id", "author", "body", "body_html", "mentions", "created_at"}


def test_a_viewer_reads_but_may_not_comment(viewer, ticket, client_for):
    client = client_for(viewer)

    assert client.get(comments_url(ticket)).status_code == 200
    refused = client.post(comments_url(ticket), {"body": "Me too"}, format="json")

    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "permission_denied"
    assert not Comment.objects.exists()


def test_watching_is_set_and_unset(viewer, ticket, client_for):
    client = client_for(viewer)

    assert client.get(watch_url(ticket)).json() == {"watching": False}
    started = client.post(watch_url(ticket), {}, format="json")
    again = client.post(watch_url(ticket))
    assert (started.status_code, started.json()) == (200, {"watching": True})
    assert again.json() == {"watching": True}
    assert Watch.objects.filter(user=viewer, item=ticket).count() == 1
    assert client.get(watch_url(ticket)).json() == {"watching": True}
    stopped = client.delete(watch_url(ticket))
    assert (stopped.status_code, stopped.json()) == (200, {"watching": False})
    assert not Watch.objects.exists()


def test_another_projects_member_and_strangers_get_404(org, users, ticket, client_for):
    neighbour = make_project(organization=org, key="NEXT")
    outsider = make_membership(project=neighbour).user
    for user in (outsider, users["stranger"]):
        client = client_for(user)
        assert client.get(comments_url(ticket)).status_code == 404
        assert client.post(comments_url(ticket), {"body": "Hi"}, format="json").status_code == 404
        assert client.get(watch_url(ticket)).status_code == 404
        assert client.post(watch_url(ticket)).status_code == 404
        assert client.delete(watch_url(ticket)).status_code == 404
    assert not Comment.objects.exists()
    assert not Watch.objects.exists()


def test_an_unknown_or_foreign_item_is_404(member, client_for, other_project, make_item):
    foreign = make_item(title="Elsewhere", target=other_project)
    client = client_for(member)
    for key in ("BAL-999", foreign.key, "BAL-²", "nonsense"):
        assert client.get(f"{BAL}items/{key}/comments/").status_code == 404, key
        assert client.post(f"{BAL}items/{key}/comments/", {"body": "x"}, format="json").status_code == 404
        assert client.post(f"{BAL}items/{key}/watch/").status_code == 404, key
    assert not Comment.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "body"),
        ({"body": ""}, "body"),
        ({"body": "   "}, "body"),
        ({"body": 42}, "body"),
        ({"body": None}, "body"),
        ({"body": ["x"]}, "body"),
        ({"body": "x" * (MAX_BODY + 1)}, "body"),
        ({"body": "nul\x00"}, "body"),
        ({"body": "fine", "author": "owner"}, "author"),
    ],
)
def test_bad_input_is_400_and_stores_nothing(member, ticket, client_for, body, field):
    response = client_for(member).post(comments_url(ticket), body, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not Comment.objects.exists()


def test_watch_refuses_a_body_with_fields(member, ticket, client_for):
    response = client_for(member).post(watch_url(ticket), {"on": True}, format="json")

    assert response.status_code == 400
    assert not Watch.objects.exists()


def test_api_keys_read_with_read_and_write_with_plan(member, ticket):
    reader = bearer(make_key(member, "read"))
    planner = bearer(make_key(member, "plan"))

    assert reader.get(comments_url(ticket)).status_code == 200
    refused = reader.post(comments_url(ticket), {"body": "Hi"}, format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "missing_scope")
    assert reader.post(watch_url(ticket)).status_code == 403
    assert planner.post(comments_url(ticket), {"body": "Hi"}, format="json").status_code == 201
    assert planner.post(watch_url(ticket)).json() == {"watching": True}
    assert Comment.objects.count() == 1
