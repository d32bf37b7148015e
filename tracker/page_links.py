"""Where the browser pages of a project's things live, for whoever links to them from outside a
template (the chat's links, a planner tool's output, the activity in words, the graph): each
address comes from the URL map, so it changes in one place.
"""

from __future__ import annotations

from django.urls import reverse


def plan_url(project_key: str) -> str:
    """The plan of the project ``project_key``."""
    return reverse("plan", args=[project_key])


def item_url(project_key: str, item_key: str) -> str:
    """The page of the ticket (or epic, or milestone) ``item_key`` of ``project_key``."""
    return reverse("item", args=[project_key, item_key])


def changeset_url(project_key: str, number: int) -> str:
    """The review page of changeset ``number`` of ``project_key``."""
    return reverse("changeset-review", args=[project_key, number])


def knowledge_url(project_key: str, entry_id: int) -> str:
    """The page of knowledge entry ``entry_id``, read from the project ``project_key``."""
    return reverse("knowledge-entry", args=[project_key, entry_id])
