"""The ``/keys/`` page: a signed-in user lists, makes (seeing the key once) and revokes their keys.
And a key opens no page and not the admin: they take the session cookie only."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from tests.factories import make_key
from tracker.models import ApiKey

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def once(client: Client) -> str:
    """The one-time value of the form the page shows."""
    found = re.search(r'name="once" value="([^"]+)"', client.get("/keys/").content.decode())
    assert found
    return found.group(1)


def sent(client: Client, form: dict) -> Any:
    """``form`` sent from the page as a browser sends it."""
    return client.post("/keys/", {**form, "once": once(client)})


def test_the_page_needs_a_login_and_the_header_links_it(member):
    assert Client().get("/keys/")["Location"] == "/accounts/login/?next=/keys/"

    home = signed_in(member).get("/")

    assertContains(home, '<a href="/keys/">API keys</a>', html=True)


def test_a_new_key_is_shown_once_then_listed_by_its_prefix(member):
    client = signed_in(member)

    made = sent(client, {"name": "CI bot", "scopes": ["read", "work"], "expires_in_days": "7"})

    assert made.status_code == 200
    secret = re.search(r'value="(ballet_[A-Za-z0-9]{12}\.[A-Za-z0-9]{40})"', made.content.decode())
    assert secret, made.content.decode()
    key = ApiKey.objects.get(user=member)
    assert (key.name, key.scopes, key.expires_at is not None) == ("CI bot", ["read", "work"], True)
    assertContains(made, "it is shown only this once")
    listed = client.get("/keys/")
    assertNotContains(listed, secret.group(1))
    assertNotContains(listed, secret.group(1).split(".")[1])
    assertContains(listed, f"<code>ballet_{key.prefix}.…</code>", html=True)
    assertContains(listed, "<td>read, work</td>", html=True)
    assert Client(HTTP_AUTHORIZATION=f"Bearer {secret.group(1)}").get("/api/v1/projects/").status_code == 200


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"name": "", "scopes": ["read"]}, "This field is required."),
        ({"name": "bot", "scopes": []}, "This field is required."),
        ({"name": "bot", "scopes": ["root"]}, "Select a valid choice."),
        ({"name": "bot", "scopes": ["read"], "expires_in_days": "0"}, "greater than or equal to 1"),
        ({"name": "bot", "scopes": ["read"], "expires_in_days": "²"}, "Enter a whole number."),
        ({"name": "bot", "scopes": ["read"], "expires_in_days": "9" * 5000}, "Enter a whole number."),
        ({"name": "two\u2028lines", "scopes": ["read"]}, "one line without control characters"),
        ({"name": "nul\x00", "scopes": ["read"]}, "Null characters are not allowed."),
    ],
)
def test_bad_input_is_shown_beside_its_field_and_makes_nothing(member, form, message):
    response = sent(signed_in(member), form)

    assert response.status_code == 200
    assertContains(response, message)
    assert not ApiKey.objects.exists()


def test_a_form_sent_again_makes_no_second_key(member):
    client = signed_in(member)
    form = {"name": "CI bot", "scopes": ["read"]}
    value = once(client)
    assert client.post("/keys/", {**form, "once": value}).status_code == 200

    again = client.post("/keys/", {**form, "once": value}, follow=True)
    forged = client.post("/keys/", {**form, "once": "made-up"}, follow=True)

    assertContains(again, "That form was sent already; its key was shown once.")
    assertContains(forged, "That form was sent already")
    assert ApiKey.objects.filter(user=member).count() == 1


def test_revoking_a_key_from_the_page_stops_it(member, owner):
    key = make_key(member, "read", name="old bot")
    row = ApiKey.objects.get(user=member)
    theirs = make_key(owner, "read")
    client = signed_in(member)

    revoked = client.post(f"/keys/{row.pk}/revoke/", follow=True)

    assertContains(revoked, f"Revoked the key old bot ({row.prefix}): it no longer works.")
    assertContains(revoked, '<span class="badge key-revoked">revoked</span>', html=True)
    assert Client(HTTP_AUTHORIZATION=f"Bearer {key}").get("/api/v1/projects/").status_code == 401
    other = ApiKey.objects.get(user=owner)
    assert client.post(f"/keys/{other.pk}/revoke/").status_code == 404
    assert client.get(f"/keys/{row.pk}/revoke/").status_code == 405
    assert Client(HTTP_AUTHORIZATION=f"Bearer {theirs}").get("/api/v1/projects/").status_code == 200


@pytest.mark.parametrize("path", ["/", "/keys/", "/projects/BAL/chat/", "/admin/", "/admin/tracker/item/"])
@pytest.mark.parametrize("scheme", ["Bearer", "Token", "Api-Key"])
def test_a_key_opens_no_page_and_not_the_admin(superuser, project, path, scheme):
    key = make_key(superuser)

    response = Client(HTTP_AUTHORIZATION=f"{scheme} {key}").get(path)

    assert response.status_code == 302
    assert response["Location"].split("?")[0] in ("/accounts/login/", "/admin/login/")


def test_a_projects_owner_sees_and_revokes_the_keys_bound_to_it_on_the_page(users, project, other_project):
    # Only keys bound to the project: a member's other keys are hers alone (issue 41).
    member_key = make_key(users["member"], "read", name="member bot")
    ApiKey.objects.get(name="member bot").projects.set([project])
    make_key(users["member"], "read", name="member's own bot")
    make_key(users["stranger"], "read", name="stranger bot")
    row = ApiKey.objects.get(name="member bot")
    owner = signed_in(users["owner"])

    page = owner.get("/keys/")

    assertContains(page, "Keys bound to")
    assertContains(page, "<td>member</td>", html=True)
    assertContains(page, "member bot")
    assertNotContains(page, "member&#x27;s own bot")
    assertNotContains(page, "stranger bot")
    assertNotContains(signed_in(users["member"]).get("/keys/"), "Keys bound to")
    assert signed_in(users["member"]).post(f"/projects/BAL/keys/{row.pk}/revoke/").status_code == 403
    assert signed_in(users["stranger"]).post(f"/projects/BAL/keys/{row.pk}/revoke/").status_code == 404
    assert owner.post(f"/projects/OTH/keys/{row.pk}/revoke/").status_code == 404
    stranger_row = ApiKey.objects.get(name="stranger bot")
    assert owner.post(f"/projects/BAL/keys/{stranger_row.pk}/revoke/").status_code == 404
    assert Client(HTTP_AUTHORIZATION=f"Bearer {member_key}").get("/api/v1/projects/").status_code == 200

    revoked = owner.post(f"/projects/BAL/keys/{row.pk}/revoke/", follow=True)

    assertContains(revoked, f"Revoked the key member bot ({row.prefix}): it no longer works.")
    assert Client(HTTP_AUTHORIZATION=f"Bearer {member_key}").get("/api/v1/projects/").status_code == 401
