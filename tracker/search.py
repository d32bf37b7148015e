"""Search over a project's items and skills: the interface the planner and the API call.

Ranking is lexical for now (words matched in the title count double); the
hybrid search of SPEC § 7 replaces :func:`rank_lexical` behind the same calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.db.models import Q

from tracker.models import Item, Project, Skill, SkillVersion
from tracker.selectors import item_number

MAX_WORDS = 8
SNIPPET_CHARS = 160
WORD = re.compile(r"[\w-]+", re.UNICODE)


@dataclass(frozen=True)
class SearchHit:
    kind: str  # "item", "skill" or "knowledge"
    key: str  # item key, skill name or knowledge id
    title: str
    snippet: str
    score: float
    state: str | None = None


def query_words(query: str) -> list[str]:
    return [w.lower() for w in WORD.findall(query)][:MAX_WORDS]


def snippet(text: str, words: Iterable[str]) -> str:
    """A window of ``text`` around the first matched word."""
    lowered = text.lower()
    positions = [p for p in (lowered.find(w) for w in words) if p >= 0]
    start = max(0, min(positions) - SNIPPET_CHARS // 3) if positions else 0
    window = text[start : start + SNIPPET_CHARS].replace("\n", " ").strip()
    return ("…" if start else "") + window + ("…" if start + SNIPPET_CHARS < len(text) else "")


def score(words: list[str], title: str, body: str) -> float:
    title_l, body_l = title.lower(), body.lower()
    return float(sum(2 * (w in title_l) + (w in body_l) for w in words))


def _matching(words: list[str], *fields: str) -> Q:
    condition = Q()
    for word in words:
        for name in fields:
            condition |= Q(**{f"{name}__icontains": word})
    return condition


def item_search(*, project: Project, query: str, limit: int = 10) -> list[SearchHit]:
    words = query_words(query)
    if not words:
        return []
    hits: list[SearchHit] = []
    number = item_number(project, query.strip().upper())
    if number is not None:
        exact = Item.objects.filter(project=project, number=number).values(
            "number", "title", "description", "state"
        )
        hits += [_item_hit(project, row, words, 100.0) for row in exact]
    rows = (
        Item.objects.filter(project=project)
        .filter(_matching(words, "title", "description"))
        .exclude(number=number or 0)
        .values("number", "title", "description", "state")[:200]
    )
    ranked = sorted(
        (
            _item_hit(project, row, words, score(words, str(row["title"]), str(row["description"])))
            for row in rows
        ),
        key=lambda h: (-h.score, h.key),
    )
    return (hits + ranked)[:limit]


def _item_hit(project: Project, row: Mapping[str, object], words: list[str], value: float) -> SearchHit:
    return SearchHit(
        kind="item",
        key=f"{project.key}-{row['number']}",
        title=str(row["title"]),
        snippet=snippet(str(row["description"]) or str(row["title"]), words),
        score=value,
        state=str(row["state"]),
    )


def skill_search(*, project: Project, query: str, limit: int = 10) -> list[SearchHit]:
    """The project's effective skills whose name or latest text matches."""
    words = query_words(query)
    if not words:
        return []
    skills = Skill.objects.filter(
        Q(organization_id=project.organization_id, project__isnull=True) | Q(project=project)
    )
    versions = (
        SkillVersion.objects.filter(skill__in=skills)
        .filter(_matching(words, "body", "skill__name"))
        .order_by("skill_id", "-version")
        .values("skill__name", "body", "version")
    )
    latest: dict[str, Mapping[str, object]] = {}
    for row in versions[:200]:
        latest.setdefault(str(row["skill__name"]), row)
    hits = [
        SearchHit(
            kind="skill",
            key=name,
            title=name,
            snippet=snippet(str(row["body"]), words),
            score=score(words, name, str(row["body"])),
        )
        for name, row in latest.items()
    ]
    return sorted(hits, key=lambda h: (-h.score, h.key))[:limit]
