"""``manage.py bootstrap``: a fresh deployment's superuser, organization and project (the README's
production setup; docs/operations.md#from-nothing). Idempotent; secrets come from environment
variables named on the command line, never from arguments (which ``ps`` shows to everyone)."""

from __future__ import annotations

import getpass
import os
import secrets
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tracker.errors import BalletError, ValidationError
from tracker.inputs import refuse_nul
from tracker.models import Project
from tracker.selectors import demo_planner_reason
from tracker.services.bootstrap import BootstrapResult, bootstrap

TEXT_OPTIONS = ("username", "email", "organization", "project_key", "project_name")
PASSWORD_ENV = "DJANGO_SUPERUSER_PASSWORD"  # noqa: S105 - a variable's name; the variable Django's own createsuperuser reads


class Command(BaseCommand):
    help = (
        "Create the first superuser, an organization and a project owned by the superuser, and "
        "optionally the project's Anthropic credential. Idempotent: what exists is left as it is."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", required=True, help="The superuser's username.")
        parser.add_argument("--email", default="", help="The superuser's email address.")
        parser.add_argument("--organization", required=True, help="The organization's name.")
        parser.add_argument("--project-key", required=True, help="2 to 10 uppercase letters or digits: ACME.")
        parser.add_argument("--project-name", required=True, help="The project's name.")
        parser.add_argument(
            "--password-env",
            default=PASSWORD_ENV,
            metavar="NAME",
            help=f"The variable holding a new superuser's password (default {PASSWORD_ENV}). Unset: "
            "asked on a terminal; with --noinput, generated and printed once.",
        )
        parser.add_argument(
            "--credential-env",
            metavar="NAME",
            help="The variable holding the project's Anthropic credential, stored encrypted (never printed).",
        )
        parser.add_argument(
            "--noinput", "--no-input", action="store_false", dest="interactive", help="Never prompt."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        credential = _credential(options["credential_env"])
        try:
            # Before the lookup of the user: PostgreSQL refuses a NUL even in a query.
            refuse_nul(**{name: options[name] for name in TEXT_OPTIONS})
            password, generated = self._password(options)
            result = bootstrap(
                username=options["username"],
                email=options["email"],
                password=password,
                organization_name=options["organization"],
                project_key=options["project_key"],
                project_name=options["project_name"],
                credential=credential,
            )
        except ValidationError as exc:
            details = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in exc.errors.items())
            raise CommandError(f"Nothing was changed: {details}") from exc
        except BalletError as exc:
            raise CommandError(f"Nothing was changed: {exc.message}") from exc
        self.stdout.write("\n".join(_lines(result, generated=generated if result.user_created else None)))
        if (warning := demo_warning(result.project)) is not None:
            self.stderr.write(self.style.WARNING(warning))

    def _password(self, options: dict[str, Any]) -> tuple[str | None, str | None]:
        """The password for a new superuser, and it again if it was generated (to print once).
        Nothing is asked when the user exists already: bootstrap leaves its password alone."""
        from django.contrib.auth.models import User  # noqa: PLC0415 - the apps are ready here

        if User.objects.filter(username=options["username"]).exists():
            return None, None
        password = os.environ.get(options["password_env"]) or None
        if password:
            return password, None
        if options["interactive"] and sys.stdin.isatty():
            first = getpass.getpass(f"Password for {options['username']}: ")
            if first != getpass.getpass("Again: "):
                raise CommandError("The passwords differ; nothing was changed.")
            return first, None
        generated = secrets.token_urlsafe(16)
        return generated, generated


def demo_warning(project: Project) -> str | None:
    """Said when the project would answer with the demo planner: a production deployment that
    forgot its credential must not find out from a user (docs/architecture.md#the-demo-planner)."""
    reason = demo_planner_reason(project)
    if reason is None:
        return None
    return (
        f"Warning: project {project.key} answers with the demo planner (scripted, no AI model): {reason}. "
        f"Set its credential with --credential-env NAME, or an owner sets it on "
        f"/projects/{project.key}/settings/ (or set ANTHROPIC_API_KEY for every project)."
    )


def _credential(name: str | None) -> str | None:
    if name is None:
        return None
    value = os.environ.get(name, "").strip()
    if not value:
        raise CommandError(f"--credential-env {name}: the variable is unset or empty; nothing was changed.")
    return value


def _lines(result: BootstrapResult, *, generated: str | None) -> list[str]:
    def state(created: bool) -> str:
        return "created" if created else "exists, unchanged"

    user = result.user.get_username()
    project = result.project
    lines = [f"superuser {user}: {state(result.user_created)}"]
    if generated:
        lines.append(f"superuser {user}: generated password (shown this once): {generated}")
    lines += [
        f"organization {project.organization.name}: {state(result.organization_created)}",
        f"project {project.key} ({project.name}): {state(result.project_created)}",
        f"{user} owner of {project.key}: {state(result.membership_created)}",
    ]
    if result.credential_set:
        lines.append(f"project {project.key}: Anthropic credential stored (encrypted)")
    return lines
