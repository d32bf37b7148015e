"""``migrate`` (and so ``make run``) says in one line why it cannot reach PostgreSQL, at once,
instead of the pool's "couldn't get a connection after 10.00 sec" and a traceback
(ballet/checks.py ``database_reachable``)."""

from __future__ import annotations

import os
import secrets
import subprocess
import uuid
from typing import Any

import psycopg
import pytest
from cryptography.fernet import Fernet
from django.conf import settings

from ballet import checks
from tests.fakes.servers import PYTHON, ROOT, free_port


class _Connection:
    vendor = "postgresql"

    def __init__(self, **params: Any) -> None:
        self.params = params

    def get_connection_params(self) -> dict[str, Any]:
        return {"client_encoding": "UTF8", **self.params}


def _server() -> dict[str, Any]:
    """The user, host and port of the tests' PostgreSQL."""
    found = settings.DATABASES["default"]
    return {"user": found.get("USER"), "host": found.get("HOST"), "port": found.get("PORT")}


def _reached(monkeypatch: pytest.MonkeyPatch, **params: Any) -> list[Any]:
    monkeypatch.setattr(checks, "connections", {"default": _Connection(**params)})
    return checks.database_reachable(databases=["default"])


def test_a_server_that_does_not_listen_is_named_with_its_address(monkeypatch):
    port = free_port()

    (error,) = _reached(monkeypatch, dbname="ballet", user="postgres", host="127.0.0.1", port=port)

    assert error.id == "ballet.E001"
    assert f"Cannot connect to the database 'ballet' on 127.0.0.1:{port} (DATABASE_URL)" in error.msg
    assert "Is the server running" in error.msg
    assert "Create the database first" in error.hint


def test_the_check_connects_with_what_django_connects_with_and_a_timeout(monkeypatch):
    seen: list[dict[str, Any]] = []

    class Refused:
        @staticmethod
        def connect(**conninfo: Any) -> None:
            seen.append(conninfo)
            raise psycopg.OperationalError("refused")

    monkeypatch.setattr(psycopg, "connect", Refused.connect)
    params = {"dbname": "ballet", "host": "db", "sslmode": "require", "cursor_factory": object}

    (error,) = _reached(monkeypatch, **params)

    assert seen == [{**params, "client_encoding": "UTF8", "connect_timeout": checks.CONNECT_SECONDS}]
    assert error.msg.endswith("(DATABASE_URL): refused")


@pytest.mark.skipif(not settings.PRODUCTION_MODE, reason="asks the PostgreSQL server of the tests")
def test_a_database_not_created_yet_is_said_so(monkeypatch):
    name = f"ballet_missing_{uuid.uuid4().hex[:8]}"

    (error,) = _reached(monkeypatch, dbname=name, **_server())

    assert f'database "{name}" does not exist' in error.msg


@pytest.mark.skipif(not settings.PRODUCTION_MODE, reason="asks the PostgreSQL server of the tests")
def test_a_database_that_exists_is_reached(monkeypatch):
    assert _reached(monkeypatch, dbname="postgres", **_server()) == []


def test_sqlite_and_checks_without_the_database_ask_nothing(monkeypatch):
    assert checks.database_reachable(databases=None) == []
    monkeypatch.setattr(checks, "connections", {"default": type("Lite", (), {"vendor": "sqlite"})()})
    assert checks.database_reachable(databases=["default"]) == []


def test_migrate_against_a_server_that_does_not_listen_fails_in_seconds_with_one_line():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_SETTINGS"))}
    env |= {
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{free_port()}/ballet",
        "REDIS_URL": env.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "BALLET_CREDENTIAL_KEY": Fernet.generate_key().decode(),
    }

    done = subprocess.run(  # this interpreter, this checkout's manage.py
        [PYTHON, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode != 0
    assert "(ballet.E001) Cannot connect to the database 'ballet' on 127.0.0.1:" in done.stderr
    assert "Traceback" not in done.stderr
    assert "couldn't get a connection" not in done.stderr
