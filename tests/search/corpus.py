"""A small fixed corpus for ranking tests: a project's plan, a skill and a knowledge entry."""

from __future__ import annotations

from django.contrib.auth.models import User

from knowledge.services import knowledge_create
from tracker.models import Item, Project
from tracker.services.activity import Actor
from tracker.services.items import item_create
from tracker.services.skills import skill_version_create

ITEMS = (
    (
        "Password reset email never arrives",
        "After requesting a reset link the message is not delivered; check the SMTP relay and bounce logs.",
    ),
    ("Export invoices as CSV", "Accountants download every invoice of a month as a spreadsheet file."),
    ("Dark theme for the dashboard", "Offer a dark colour scheme that follows the operating system setting."),
    ("Rate limit the public API", "Reject clients above 100 requests per minute with HTTP 429."),
    ("Flaky checkout test on CI", "The payment end-to-end test fails one run in ten on the build server."),
    (
        "Upgrade the zyxvorp client library",
        "Bump the vendored zyxvorp SDK to 4.2 and rotate its credentials.",
    ),
    (
        "Onboarding checklist for new workspaces",
        "Guide first-time admins through inviting teammates and connecting a repository.",
    ),
)
SKILL = (
    "release-checklist",
    "Before tagging a release: run the migration check, update the changelog, announce the version.",
)
KNOWLEDGE = (
    "Run PostgreSQL in production",
    "We chose PostgreSQL over MySQL for its full-text search and transactional DDL.",
)


def build(project: Project, user: User) -> dict[str, Item]:
    """Write the corpus through the services, as ``user``; items by their title's first word."""
    actor = Actor(user=user)
    items = {
        title.split()[0].lower(): item_create(
            actor=actor, project=project, kind="ticket", fields={"title": title, "description": body}
        )
        for title, body in ITEMS
    }
    skill_version_create(actor=actor, project=project, name=SKILL[0], body=SKILL[1])
    knowledge_create(actor=actor, kind="decision", title=KNOWLEDGE[0], body=KNOWLEDGE[1], projects=[project])
    return items
