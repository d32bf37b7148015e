"""Template tags of the planner for the tracker's plan and ticket pages: the questions agents
asked, each with its sub-chat when the reader may open it.

The tracker's pages show them without importing the planner (dependencies
point from the planner to the tracker, never back).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django import template
from django.contrib.auth.models import User
from django.urls import reverse

from planner.domain.selectors import sessions_visible
from planner.domain.services.agent_questions import question_list
from planner.models import Question, QuestionStatus
from tracker.errors import PermissionDeniedError
from tracker.models import Item, Project

register = template.Library()

MAX_SHOWN = 20
UNANSWERED = (QuestionStatus.OPEN, QuestionStatus.NEEDS_HUMAN)


@dataclass(frozen=True)
class QuestionShown:
    """A question and the address of its sub-chat ("" if the reader may not open it)."""

    question: Question
    chat_url: str


def _reader(context: dict[str, Any]) -> User | None:
    user = getattr(context.get("request"), "user", None)
    return user if isinstance(user, User) else None


def _shown(user: User, questions: Iterable[Question]) -> list[QuestionShown]:
    """``questions`` with their sub-chats among those ``user`` may read, in one more query."""
    listed = list(questions)
    chats = dict(
        sessions_visible(user=user)
        .filter(question_id__in=[q.pk for q in listed])
        .values_list("question_id", "pk")
    )
    return [
        QuestionShown(q, reverse("planner-chat", args=[q.project.key, chats[q.pk]]) if q.pk in chats else "")
        for q in listed
    ]


def _questions(context: dict[str, Any], project: Project, item: Item | None) -> list[QuestionShown]:
    user = _reader(context)
    if user is None:
        return []
    try:
        qs = question_list(user=user, project=project)
    except PermissionDeniedError:
        return []
    qs = qs.filter(item=item) if item is not None else qs.filter(status__in=UNANSWERED)
    return _shown(user, qs.order_by("-created_at", "-pk")[:MAX_SHOWN])


@register.simple_tag(takes_context=True)
def open_questions(context: dict[str, Any], project: Project) -> list[QuestionShown]:
    """``{% open_questions project as questions %}``: its questions still waiting for an answer."""
    return _questions(context, project, None)


@register.simple_tag(takes_context=True)
def item_questions(context: dict[str, Any], item: Item) -> list[QuestionShown]:
    """``{% item_questions item as questions %}``: the questions about ``item``, answered or not."""
    return _questions(context, item.project, item)
