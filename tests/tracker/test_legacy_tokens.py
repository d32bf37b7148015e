"""Legacy DRF tokens are retired with a documented window (docs/api-keys.md#legacy-tokens): until
LEGACY_TOKEN_SUNSET their answers say they are deprecated and when they stop; after it they are
refused 401 naming /keys/. ``retire_tokens`` turns each into an API key of its user."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.factories import make_key
from tracker.models import ApiKey, Scope
from tracker.web.credentials import LEGACY_TOKEN_SUNSET

pytestmark = pytest.mark.django_db

AFTER = datetime.combine(LEGACY_TOKEN_SUNSET + timedelta(days=1), datetime.min.time(), tzinfo=UTC)


def token_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


@pytest.fixture
def token(member) -> str:
    return Token.objects.create(user=member).key


@pytest.fixture
def after_sunset(monkeypatch):
    monkeypatch.setattr(timezone, "now", lambda: AFTER)


def test_until_the_sunset_a_token_works_and_says_it_is_deprecated(token, project):
    response = token_client(token).get("/api/v1/projects/")

    assert response.status_code == 200
    assert response["Deprecation"] == "true"
    assert response["Sunset"] == "Wed, 30 Jun 2027 23:59:59 GMT"


def test_an_api_key_and_a_session_carry_no_deprecation(member, project):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_key(member)}")
    by_key = client.get("/api/v1/projects/")
    by_session = APIClient()
    by_session.force_login(member)

    assert "Deprecation" not in by_key
    assert "Deprecation" not in by_session.get("/api/v1/projects/")


def test_the_token_endpoint_says_it_is_deprecated_in_its_answer_and_schema(member):
    response = APIClient().post("/api/v1/auth/token/", {"username": "member", "password": "pw-for-tests"})
    schema = APIClient()
    schema.force_login(member)
    operation = schema.get("/api/schema/?format=json").json()["paths"]["/api/v1/auth/token/"]["post"]

    assert response.status_code == 200
    assert "Deprecated" in response.json()["deprecated"]
    assert response["Sunset"] == "Wed, 30 Jun 2027 23:59:59 GMT"
    assert operation["deprecated"] is True
    assert "API key" in operation["description"]


def test_after_the_sunset_a_token_is_refused_401_naming_keys(token, project, after_sunset):
    response = token_client(token).get("/api/v1/projects/")

    assert response.status_code == 401
    assert "/keys/" in response.json()["error"]["message"]
    assert LEGACY_TOKEN_SUNSET.isoformat() in response.json()["error"]["message"]


def test_after_the_sunset_no_token_is_handed_out(member, after_sunset):
    response = APIClient().post("/api/v1/auth/token/", {"username": "member", "password": "pw-for-tests"})

    assert response.status_code == 410
    assert "/keys/" in response.json()["error"]["message"]
    assert not Token.objects.exists()


def test_retire_tokens_turns_each_token_into_a_key_printed_once(member, owner, token, project):
    Token.objects.create(user=owner)
    out = StringIO()

    call_command("retire_tokens", stdout=out)

    assert not Token.objects.exists()
    keys = ApiKey.objects.filter(name="Legacy token").order_by("user__username")
    assert [(key.user.username, key.scopes) for key in keys] == [
        ("member", Scope.values),
        ("owner", Scope.values),
    ]
    printed = out.getvalue()
    assert printed.count("ballet_") == 2
    secret = next(line.split(": ")[1] for line in printed.splitlines() if line.startswith("member: "))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/api/v1/projects/").status_code == 200
    assert token_client(token).get("/api/v1/projects/").status_code == 401


def test_retire_tokens_dry_run_changes_nothing(token):
    out = StringIO()

    call_command("retire_tokens", "--dry-run", stdout=out)

    assert "1 legacy token" in out.getvalue()
    assert Token.objects.count() == 1
    assert not ApiKey.objects.exists()
