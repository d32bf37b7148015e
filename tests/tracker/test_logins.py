"""Failed logins (docs/trust.md): 5 per username and per IP in 15 minutes, then refused, the right
password too."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import F
from django.test import AsyncClient, Client
from rest_framework.test import APIClient

PASSWORD = "pw-for-tests"
FORM = "/accounts/login/"
ADMIN = "/admin/login/"
TOKEN = "/api/v1/auth/token/"


def _fail(client: Client, url: str, username: str, times: int, ip: str = "127.0.0.1") -> None:
    for _ in range(times):
        client.post(url, {"username": username, "password": "wrong"}, REMOTE_ADDR=ip)


def _age_failures(seconds: float) -> None:
    """Move every recorded failure ``seconds`` into the past, as if that time had passed."""
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(seconds=seconds))


@pytest.fixture
def staff(db) -> User:
    return User.objects.create_superuser(username="root", password=PASSWORD)


def test_the_limit_comes_from_the_ballet_limits():
    assert settings.BALLET_LIMITS.login_failures == 5
    assert settings.AXES_FAILURE_LIMIT == 5
    assert settings.AXES_COOLOFF_TIME.total_seconds() == 900


def test_form_refuses_the_right_password_after_five_failures(client: Client, member):
    _fail(client, FORM, "member", 4)
    assert client.post(FORM, {"username": "member", "password": "wrong"}).status_code == 429

    response = client.post(FORM, {"username": "member", "password": PASSWORD})

    assert response.status_code == 429
    assert "Too many failed logins; try again in 15 minutes." in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_four_failures_still_let_the_right_password_in(client: Client, member):
    _fail(client, FORM, "member", 4)

    response = client.post(FORM, {"username": "member", "password": PASSWORD})

    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(member.pk)


def test_admin_login_refuses_the_right_password_after_five_failures(client: Client, staff):
    _fail(client, ADMIN, "root", 5)

    response = client.post(ADMIN, {"username": "root", "password": PASSWORD, "next": "/admin/"})

    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_token_endpoint_refuses_the_right_password_after_five_failures(api_client: APIClient, member):
    for _ in range(4):
        response = api_client.post(TOKEN, {"username": "member", "password": "wrong"}, format="json")
        assert response.status_code == 400
    fifth = api_client.post(TOKEN, {"username": "member", "password": "wrong"}, format="json")
    assert fifth.status_code == 429

    response = api_client.post(TOKEN, {"username": "member", "password": PASSWORD}, format="json")

    assert response.status_code == 429
    assert response.json() == {
        "error": {"code": "rate_limited", "message": "Too many failed logins; try again in 15 minutes."}
    }


def test_token_endpoint_still_gives_the_token_below_the_limit(api_client: APIClient, member):
    api_client.post(TOKEN, {"username": "member", "password": "wrong"}, format="json")

    response = api_client.post(TOKEN, {"username": "member", "password": PASSWORD}, format="json")

    assert response.status_code == 200
    assert response.json()["token"]


def test_failures_of_one_username_lock_it_from_every_address(client: Client, member):
    for number in range(5):
        _fail(client, FORM, "member", 1, ip=f"10.0.0.{number + 1}")

    response = client.post(FORM, {"username": "member", "password": PASSWORD}, REMOTE_ADDR="10.0.0.99")

    assert response.status_code == 429


def test_failures_from_one_address_lock_every_username_there(client: Client, member, viewer):
    for name in ("alice", "bob", "carol", "dave", "erin"):
        _fail(client, FORM, name, 1, ip="10.0.0.7")

    refused = client.post(FORM, {"username": "member", "password": PASSWORD}, REMOTE_ADDR="10.0.0.7")
    elsewhere = Client().post(FORM, {"username": "viewer", "password": PASSWORD}, REMOTE_ADDR="10.0.0.8")

    assert refused.status_code == 429
    assert elsewhere.status_code == 302


def test_logging_into_ones_own_account_does_not_clear_the_address_count(client: Client, member, viewer):
    """An attacker with an account of their own cannot interleave successes to keep guessing."""
    for guess in range(5):
        _fail(client, FORM, f"victim-{guess}", 1, ip="10.0.0.7")
        if guess < 4:
            own = Client().post(FORM, {"username": "viewer", "password": PASSWORD}, REMOTE_ADDR="10.0.0.7")
            assert own.status_code == 302

    response = client.post(FORM, {"username": "member", "password": PASSWORD}, REMOTE_ADDR="10.0.0.7")

    assert response.status_code == 429


def test_the_window_passing_lets_the_user_in_again(client: Client, member):
    _fail(client, FORM, "member", 5)
    _age_failures(settings.BALLET_LIMITS.login_window_seconds - 120)
    almost = client.post(FORM, {"username": "member", "password": PASSWORD})
    assert almost.status_code == 429
    assert "try again in 2 minutes" in almost.content.decode()

    _age_failures(121)
    response = client.post(FORM, {"username": "member", "password": PASSWORD})

    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(member.pk)


def test_refused_tries_do_not_stretch_the_window(client: Client, member):
    _fail(client, FORM, "member", 5)
    _age_failures(settings.BALLET_LIMITS.login_window_seconds - 60)
    _fail(client, FORM, "member", 3)
    _age_failures(61)

    response = client.post(FORM, {"username": "member", "password": PASSWORD})

    assert response.status_code == 302


def test_the_lockout_page_is_readable(client: Client, member):
    _fail(client, FORM, "member", 5)

    response = client.post(FORM, {"username": "member", "password": PASSWORD})

    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    alert = '<div class="errors" role="alert"><p>Too many failed logins; try again in 15 minutes.</p></div>'
    assert alert in page


def test_the_test_clients_login_is_not_limited(client: Client, member):
    """``authenticate`` without a request (management commands, ``Client.login``) has no client to count."""
    _fail(client, FORM, "member", 5)

    assert client.login(username="member", password=PASSWORD)


@pytest.mark.django_db(transaction=True)
async def test_asgi_requests_are_counted_by_their_client_address(member):
    """Through the ASGI handler, as daphne serves it: REMOTE_ADDR comes from the connection."""
    client = AsyncClient()
    for _ in range(5):
        await client.post(FORM, {"username": "member", "password": "wrong"})

    response = await client.post(FORM, {"username": "member", "password": PASSWORD})

    assert response.status_code == 429
    assert "Too many failed logins; try again in 15 minutes." in response.content.decode()
    assert await AccessAttempt.objects.filter(ip_address="127.0.0.1").aexists()


def test_a_recorded_failure_keeps_no_password_or_csrf_token(member):
    client = Client(enforce_csrf_checks=True)
    client.get(FORM)
    token = client.cookies["csrftoken"].value
    client.post(FORM, {"username": "member", "password": "s3cret-guess", "csrfmiddlewaretoken": token})

    attempt = AccessAttempt.objects.get(username="member")

    assert attempt.failures_since_start == 1
    assert "s3cret-guess" not in attempt.post_data
    assert token not in attempt.post_data
