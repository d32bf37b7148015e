"""Template tags of the planner for the tracker's plan page: does the demo planner answer this
project's chats (docs/architecture.md#the-demo-planner), and may the reader set the credential?

The plan page says it to the project's owners, who can change it, and words its empty plan's
invitation for the planner that answers, without importing the planner (dependencies point from
the planner to the tracker, never back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import template
from django.contrib.auth.models import User

from planner.domain.selectors import project_provider
from tracker.models import Project
from tracker.trust.permissions import PROJECT_ADMIN, has_permission

register = template.Library()


@dataclass(frozen=True)
class Answering:
    demo: bool  # the demo planner answers: scripted, no AI model
    can_set_credential: bool  # the reader owns the project: its settings page is theirs


@register.simple_tag(takes_context=True)
def planner_answering(context: dict[str, Any], project: Project) -> Answering:
    """``{% planner_answering project as answering %}``: who answers the project's chats, for the reader."""
    user = getattr(context.get("request"), "user", None)
    owner = isinstance(user, User) and has_permission(user, project, PROJECT_ADMIN)
    return Answering(demo=project_provider(project) == "demo", can_set_credential=owner)
