"""``manage.py bootstrap`` warns when the project it made would answer with the demo planner (no
credential anywhere, or its provider setting), and says nothing once Claude answers."""

from __future__ import annotations

import dataclasses
from io import StringIO

import pytest
from django.core.management import call_command

from tests.tracker.test_bootstrap import ARGS, PASSWORD
from tracker.models import Project

pytestmark = pytest.mark.django_db

WARNING = "Warning: project ACME answers with the demo planner (scripted, no AI model)"


@pytest.fixture(autouse=True)
def no_server_key(settings, monkeypatch):
    settings.SERVER = dataclasses.replace(settings.SERVER, anthropic_api_key=None)
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", PASSWORD)


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("bootstrap", *ARGS, *args, "--noinput", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_without_a_credential_bootstrap_says_the_demo_answers_and_how_to_set_one():
    out, err = run()
    assert "project ACME (Acme web): created" in out
    assert WARNING in err
    assert "it has no Anthropic credential and the server sets no ANTHROPIC_API_KEY" in err
    assert "--credential-env NAME" in err
    assert "/projects/ACME/settings/" in err
    assert WARNING not in out  # stdout stays the record of what was made
    assert WARNING in run()[1]  # every run, until it is set


def test_with_a_credential_or_the_servers_key_it_says_nothing(settings, monkeypatch):
    monkeypatch.setenv("ACME_KEY", "sk-ant-test-credential-0123456789")
    assert run("--credential-env", "ACME_KEY")[1] == ""
    Project.objects.filter(key="ACME").update(credential_encrypted="")
    assert WARNING in run()[1]
    settings.SERVER = dataclasses.replace(settings.SERVER, anthropic_api_key="sk-ant-server")
    assert run()[1] == ""


def test_a_project_set_to_the_demo_is_named_as_such_even_with_a_credential(monkeypatch):
    monkeypatch.setenv("ACME_KEY", "sk-ant-test-credential-0123456789")
    run("--credential-env", "ACME_KEY")
    Project.objects.filter(key="ACME").update(settings={"provider": "demo"})
    err = run()[1]
    assert WARNING in err
    assert "its provider setting" in err
