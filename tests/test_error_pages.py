"""Error pages never print a secret, with DEBUG on or off (docs/trust.md#secrets)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ballet.errors import SecretSafeExceptionReporterFilter

ROOT = Path(__file__).resolve().parent.parent

SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-leak-anthropic-0123456789",
    "DJANGO_SECRET_KEY": "leak-django-secret-key-0123456789abcdef",
    "BALLET_CREDENTIAL_KEY": "bGVhay1jcmVkZW50aWFsLWtleS0wMTIzNDU2Nzg5YWI=",
    "BALLET_CREDENTIAL_KEY_FALLBACKS": "bGVhay1mYWxsYmFjay1rZXktMDEyMzQ1Njc4OWFiY2Q=",
}
DATABASE_PASSWORD = "leak-db-password-42"
REDIS_PASSWORD = "leak-redis-password-42"

# A view that raises, rendered through the test client as a browser (HTML) and a script (text) see it.
SCRIPT = """
import django
django.setup()
from django.test import Client
from django.test.utils import override_settings, setup_test_environment
from django.urls import path

def boom(request):
    raise RuntimeError("boom")

urlpatterns = [path("boom/", boom)]
handler500 = "ballet.errors.server_error"
setup_test_environment()
for debug in (True, False):
    with override_settings(DEBUG=debug, ROOT_URLCONF="__main__"):
        for accept in ("text/html", "text/plain"):
            response = Client(raise_request_exception=False).get("/boom/", HTTP_ACCEPT=accept)
            print(f"=== DEBUG={debug} {accept} {response.status_code}")
            print(response.content.decode())
"""


def _render(env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "ballet.settings.base", **SECRETS, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _assert_pages_hold_no_secret(output: str) -> None:
    pages = output.split("=== ")[1:]
    assert [page.split("\n", 1)[0] for page in pages] == [
        "DEBUG=True text/html 500",
        "DEBUG=True text/plain 500",
        "DEBUG=False text/html 500",
        "DEBUG=False text/plain 500",
    ]
    # The debug pages did render the settings (masked), so the absence below means something.
    assert "SECRET_KEY" in pages[0]
    assert "SERVER" in pages[0]
    assert "RuntimeError" in pages[1]
    for value in [*SECRETS["BALLET_CREDENTIAL_KEY_FALLBACKS"].split(","), *SECRETS.values()]:
        assert value not in output
    assert DATABASE_PASSWORD not in output
    assert REDIS_PASSWORD not in output


def test_production_error_pages_hold_no_secret():
    output = _render(
        {
            "DATABASE_URL": f"postgres://postgres:{DATABASE_PASSWORD}@127.0.0.1:5432/ballet_no_such_db",
            "REDIS_URL": f"redis://:{REDIS_PASSWORD}@127.0.0.1:6379/11",
        }
    )
    _assert_pages_hold_no_secret(output)
    assert "redis://:********************@127.0.0.1:6379/11" in output


def test_embedded_error_pages_hold_no_secret(tmp_path: Path):
    output = _render(
        {"DATABASE_URL": "", "REDIS_URL": "", "BALLET_SQLITE_PATH": str(tmp_path / "db" / "ballet.sqlite3")}
    )
    _assert_pages_hold_no_secret(output)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("redis://:pw@host:6379/0", "redis://:********************@host:6379/0"),
        ("postgres://user:p%40ss@db/ballet", "postgres://user:********************@db/ballet"),
        ("redis://host:6379/0", "redis://host:6379/0"),
        ("memory://", "memory://"),
    ],
)
def test_passwords_in_urls_are_masked(value, shown):
    cleaned = SecretSafeExceptionReporterFilter().cleanse_setting(
        "CHANNEL_LAYERS", {"hosts": [{"address": value}]}
    )
    assert cleaned == {"hosts": [{"address": shown}]}
