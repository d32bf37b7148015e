"""Search over a project's items and skills: the interface the planner and the REST API call.

The engine behind it (docs/search.md) is hybrid: the database's full-text search
(:mod:`~tracker.search.lexical`) and sentence embeddings
(:mod:`~tracker.search.embeddings`, :mod:`~tracker.search.semantic`) fused by
reciprocal rank (:mod:`~tracker.search.fusion`) in :mod:`~tracker.search.engine`.
Callers authorize first; a scope names only what the caller may read.
"""

from __future__ import annotations

from collections.abc import Iterable

from tracker.models import Project
from tracker.search.engine import search
from tracker.search.types import ITEM, KNOWLEDGE, SKILL, Mode, SearchHit, SearchScope

__all__ = [
    "ITEM",
    "KNOWLEDGE",
    "SKILL",
    "Mode",
    "SearchHit",
    "SearchScope",
    "item_search",
    "project_search",
    "search",
    "skill_search",
]


def project_search(
    *,
    project: Project,
    query: str,
    kinds: Iterable[str] = (ITEM, SKILL),
    item_kinds: Iterable[str] = (),
    states: Iterable[str] = (),
    limit: int = 10,
) -> list[SearchHit]:
    """The project's items and effective skills (those of ``kinds``) in one ranking.

    ``item_kinds`` (milestone, epic, ticket) and ``states`` narrow the items;
    a state filter leaves out skills, which have none.
    """
    scope = SearchScope(
        organization_id=project.organization_id,
        kinds=frozenset(kinds) & {ITEM, SKILL},
        project_id=project.pk,
        subkinds=frozenset(item_kinds),
        states=frozenset(states),
    )
    return search(scope=scope, query=query, limit=limit)


def item_search(*, project: Project, query: str, limit: int = 10) -> list[SearchHit]:
    return project_search(project=project, query=query, kinds=(ITEM,), limit=limit)


def skill_search(*, project: Project, query: str, limit: int = 10) -> list[SearchHit]:
    """The project's effective skills: its own, and its organization's that none of its own shadows."""
    return project_search(project=project, query=query, kinds=(SKILL,), limit=limit)
