"""A ticket's brief (docs/domain.md#work): everything a worker needs to start, in one read.

The ticket with its criteria and policy; its epic and milestone; its blockers,
each with its final report (the latest ``done`` report on it), and what it
blocks; its claim and the reports on it; the knowledge linked to it or to its
epic, bodies included, as the reader may read it (docs/domain.md#knowledge);
the answered questions about it; the project's effective skills by name and
version. A fixed number of queries, whatever the size of the project: every
list is read in one query, and the long ones are capped (``MAX_*``).
"""

from __future__ import annotations

from typing import Any

from knowledge.selectors import knowledge_links, knowledge_visible
from planner.models import Question, QuestionStatus
from tracker.errors import ValidationError
from tracker.models import Claim, Item, ItemKind, Project, Report
from tracker.selectors import (
    claims_active_by_item,
    final_reports,
    item_dependencies,
    item_get,
    reports_on,
    skill_effective_list,
    with_article,
)
from tracker.trust.permissions import (
    KNOWLEDGE_READ,
    SKILL_READ,
    TRACKER_READ,
    Principal,
    has_permission,
    require,
)
from tracker.web.work_serializers import ClaimSerializer, ReportSerializer

MAX_KNOWLEDGE = 20
MAX_QUESTIONS = 20
MAX_REPORTS = 20

JsonObject = dict[str, Any]


def report_json(report: Report) -> JsonObject:
    """A report as REST shows it (read with its author and its item's project)."""
    return dict(ReportSerializer(report).data)


def claim_json(claim: Claim) -> JsonObject:
    """A claim as REST shows it (read with its holder and its item's project)."""
    return dict(ClaimSerializer(claim).data)


def _item_head(item: Item) -> JsonObject:
    return {"key": item.key, "kind": item.kind, "title": item.title, "state": item.state}


def _knowledge(reader: Principal, project: Project, item: Item) -> list[JsonObject]:
    if not has_permission(reader, project, KNOWLEDGE_READ):
        return []
    linked = [item.pk, item.epic_id] if item.epic_id else [item.pk]
    entries = list(
        knowledge_visible(user=reader)
        .filter(items__in=linked, organization_id=project.organization_id)
        .distinct()
        .order_by("-updated_at", "-pk")[:MAX_KNOWLEDGE]
    )
    links = knowledge_links(user=reader, entry_ids=[entry.pk for entry in entries])
    found = []
    for entry in entries:
        entry_links = links.get(entry.pk)
        found.append(
            {
                "id": entry.pk,
                "kind": entry.kind,
                "title": entry.title,
                "body": entry.body,
                "version": entry.version,
                "items": entry_links.items if entry_links else [],
                "updated_at": entry.updated_at.isoformat(),
            }
        )
    return found


def _questions(project: Project, item: Item) -> list[JsonObject]:
    rows = (
        Question.objects.filter(project=project, item=item, status=QuestionStatus.ANSWERED)
        .select_related("asker")
        .order_by("-answered_at", "-pk")[:MAX_QUESTIONS]
    )
    return [
        {
            "id": question.pk,
            "text": question.text,
            "answer": question.answer,
            "answered_by": question.answered_by,
            "answered_via": question.answered_via,
            "answered_at": question.answered_at.isoformat() if question.answered_at else None,
            "asker": question.asker.get_username(),
        }
        for question in rows
    ]


def _skills(reader: Principal, project: Project) -> list[JsonObject]:
    if not has_permission(reader, project, SKILL_READ):
        return []
    return [
        {"name": s.name, "scope": s.scope, "version": s.version.version, "pinned": s.pinned}
        for s in skill_effective_list(project=project)
    ]


def brief_read(*, reader: Principal, project: Project, item_key: str) -> JsonObject:
    """The brief of the ticket ``item_key`` as ``reader`` may read it (needs ``tracker.read``)."""
    require(reader, project, TRACKER_READ)
    item = item_get(project=project, key=item_key)
    if item.kind != ItemKind.TICKET:
        raise ValidationError({"item": [f"{item.key} is {with_article(item.kind)}: a brief is a ticket's."]})
    dependencies = item_dependencies(item=item)
    finals = final_reports(item_ids=[blocker.pk for blocker in dependencies.blockers])
    claim = claims_active_by_item(item_ids=[item.pk]).get(item.pk)
    latest = reports_on(item=item, limit=MAX_REPORTS)
    epic, milestone = item.epic, item.milestone
    return {
        "ticket": {
            **_item_head(item),
            "version": item.version,
            "description": item.description,
            "acceptance_criteria": list(item.acceptance_criteria or []),
            "policy": item.policy or {},
        },
        "epic": {**_item_head(epic), "description": epic.description} if epic else None,
        "milestone": _item_head(milestone) if milestone else None,
        "blockers": [
            {
                **_item_head(blocker),
                "final_report": report_json(finals[blocker.pk]) if blocker.pk in finals else None,
            }
            for blocker in dependencies.blockers
        ],
        "blocks": [_item_head(blocked) for blocked in dependencies.blocking],
        "claim": claim_json(claim) if claim else None,
        "reports": [report_json(report) for report in latest],
        "knowledge": _knowledge(reader, project, item),
        "questions": _questions(project, item),
        "skills": _skills(reader, project),
    }
