"""Where the browser pages of a project's things live: the one place that spells their URLs.

Whatever links to a ticket, a changeset's review, a knowledge entry or a plan (the chat's
links, a planner tool's output, a page) asks here, so an address changes in one place.
"""

from __future__ import annotations


def plan_url(project_key: str) -> str:
    """The plan of the project ``project_key``."""
    return f"/projects/{project_key}/"


def item_url(project_key: str, item_key: str) -> str:
    """The page of the ticket (or epic, or milestone) ``item_key`` of ``project_key``."""
    return f"/projects/{project_key}/items/{item_key}/"


def changeset_url(project_key: str, number: int) -> str:
    """The review page of changeset ``number`` of ``project_key``."""
    return f"/projects/{project_key}/changesets/{number}/"


def knowledge_url(project_key: str, entry_id: int) -> str:
    """The page of knowledge entry ``entry_id``, read from the project ``project_key``."""
    return f"/projects/{project_key}/knowledge/{entry_id}/"
