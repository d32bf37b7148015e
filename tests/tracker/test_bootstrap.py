"""``manage.py bootstrap``: a fresh deployment's superuser, organization, project and owner, and
the project's credential stored encrypted; idempotent, and all or nothing on bad input."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from tracker.models import ActivityEvent, Membership, Organization, Project, Role
from tracker.trust.crypto import decrypt
from tracker.trust.permissions import PROJECT_ADMIN, has_permission

pytestmark = pytest.mark.django_db

ARGS = (
    "--username",
    "root",
    "--organization",
    "Acme Inc",
    "--project-key",
    "ACME",
    "--project-name",
    "Acme web",
)
PASSWORD = "a long enough passphrase 7"
CREDENTIAL = "sk-ant-test-credential-0123456789"


def run(*args: str) -> str:
    out = StringIO()
    call_command("bootstrap", *args, "--noinput", stdout=out)
    return out.getvalue()


@pytest.fixture
def password(monkeypatch) -> str:
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", PASSWORD)
    return PASSWORD


def test_bootstrap_builds_the_superuser_the_organization_and_the_project_it_owns(password):
    out = run(*ARGS, "--email", "root@example.com")

    root = User.objects.get(username="root")
    assert root.is_superuser
    assert root.is_staff
    assert root.email == "root@example.com"
    assert authenticate(username="root", password=password) == root
    project = Project.objects.get(key="ACME")
    assert (project.name, project.organization.name, project.organization.slug) == (
        "Acme web",
        "Acme Inc",
        "acme-inc",
    )
    assert Membership.objects.get(project=project).role == Role.OWNER
    assert has_permission(root, project, PROJECT_ADMIN)
    assert ActivityEvent.objects.filter(project=project, verb="membership.set").count() == 1
    assert "superuser root: created" in out
    assert "project ACME (Acme web): created" in out
    assert password not in out


def test_a_second_run_changes_nothing(password):
    run(*ARGS)
    events = ActivityEvent.objects.count()

    out = run(*ARGS)

    assert (User.objects.count(), Organization.objects.count(), Project.objects.count()) == (1, 1, 1)
    assert Membership.objects.count() == 1
    assert ActivityEvent.objects.count() == events
    assert out.count("exists, unchanged") == 4


def test_without_a_password_variable_one_is_generated_and_printed_once(monkeypatch):
    monkeypatch.delenv("DJANGO_SUPERUSER_PASSWORD", raising=False)

    out = run(*ARGS)

    generated = re.search(r"generated password \(shown this once\): (\S+)", out)
    assert generated, out
    assert authenticate(username="root", password=generated.group(1)) is not None
    assert "generated password" not in run(*ARGS)


def test_the_credential_is_stored_encrypted_and_never_printed(password, monkeypatch):
    monkeypatch.setenv("ACME_ANTHROPIC_KEY", CREDENTIAL)

    out = run(*ARGS, "--credential-env", "ACME_ANTHROPIC_KEY")

    project = Project.objects.get(key="ACME")
    assert CREDENTIAL not in project.credential_encrypted
    assert decrypt(project.credential_encrypted) == CREDENTIAL
    assert "Anthropic credential stored (encrypted)" in out
    assert CREDENTIAL not in out
    assert CREDENTIAL not in str(list(ActivityEvent.objects.values("data")))


def test_an_unset_credential_variable_is_refused_before_anything_is_written(password, monkeypatch):
    monkeypatch.delenv("ACME_ANTHROPIC_KEY", raising=False)

    with pytest.raises(CommandError, match="ACME_ANTHROPIC_KEY: the variable is unset or empty"):
        run(*ARGS, "--credential-env", "ACME_ANTHROPIC_KEY")

    assert not User.objects.exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("--project-key", "acme"), "'acme': A project key is 2 to 10 uppercase letters or digits."),
        (("--project-key", "A"), "'A': A project key is 2 to 10 uppercase letters or digits."),
        (("--project-name", "  "), "Expected 1 to 200 characters."),
        (("--organization", "!!!"), "some of them letters or digits"),
        (("--username", "x\x00y"), "username: NUL characters are not allowed."),
        (("--organization", "A\x00B"), "organization: NUL characters are not allowed."),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(password, change, message):
    args = list(ARGS)
    args[args.index(change[0]) + 1] = change[1]

    with pytest.raises(CommandError, match=re.escape(message)):
        run(*args)

    assert not User.objects.exists()
    assert not Organization.objects.exists()


def test_a_weak_password_is_refused_with_the_validators_words(monkeypatch):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "1234")

    with pytest.raises(CommandError, match="This password is too short"):
        run(*ARGS)

    assert not User.objects.exists()


def test_an_existing_user_who_is_not_a_superuser_is_refused(password):
    User.objects.create_user(username="root", password="whatever-else-9")

    with pytest.raises(CommandError, match="'root' exists and is not an active superuser"):
        run(*ARGS)

    assert not Project.objects.exists()


def test_a_superuser_with_another_role_in_the_project_is_refused(password):
    run(*ARGS)
    Membership.objects.filter(project__key="ACME").update(role=Role.MEMBER)

    with pytest.raises(CommandError, match="root is a member of ACME, not its owner"):
        run(*ARGS)


def test_a_project_of_another_organization_is_refused(password):
    run(*ARGS)

    with pytest.raises(CommandError, match=r"Project ACME exists in another organization \(Acme Inc\)"):
        run(*[a if a != "Acme Inc" else "Globex" for a in ARGS])

    assert not Organization.objects.filter(name="Globex").exists()
