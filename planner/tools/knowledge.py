"""Tools over the knowledge base: search_knowledge, get_knowledge, create_knowledge, update_knowledge.

The planner reads only what its human may read (:func:`knowledge.selectors.knowledge_visible`).
Knowledge the planner writes is linked to the session's project, so it is
readable only where that project is, and attributed to the human it acts for.
"""

from __future__ import annotations

from typing import Any

from knowledge.models import KnowledgeEntry, KnowledgeKind
from knowledge.selectors import knowledge_find, knowledge_visible
from knowledge.services import knowledge_create, knowledge_update
from planner.tools.base import JsonObject, ToolContext, ToolError, ToolSpec
from tracker.errors import NotFoundError
from tracker.models import Item
from tracker.permissions import KNOWLEDGE_READ, KNOWLEDGE_WRITE, TRACKER_READ, project_ids_with
from tracker.selectors import item_number

KINDS: JsonObject = {"enum": list(KnowledgeKind.values)}


def _entry(ctx: ToolContext, entry_id: int) -> KnowledgeEntry:
    """An entry of the session's organization that the human may read."""
    visible = knowledge_visible(user=ctx.user).filter(organization_id=ctx.project.organization_id)
    entry = visible.filter(pk=entry_id).first()
    if entry is None:
        raise NotFoundError(f"Knowledge entry {entry_id} not found.")
    return entry


def search_knowledge(ctx: ToolContext, args: JsonObject) -> JsonObject:
    hits = knowledge_find(
        user=ctx.user,
        organization_id=ctx.project.organization_id,
        query=args["query"],
        kind=args.get("kind"),
        limit=args.get("limit", 10),
    )
    return {
        "results": [
            {"id": int(h.key), "kind": h.subkind, "title": h.title, "snippet": h.snippet, "score": h.score}
            for h in hits
        ]
    }


def get_knowledge(ctx: ToolContext, args: JsonObject) -> JsonObject:
    entry = _entry(ctx, args["id"])
    readable = project_ids_with(ctx.user, KNOWLEDGE_READ)
    projects = list(entry.projects.filter(pk__in=readable).values_list("key", flat=True))
    items = [
        f"{p}-{n}"
        for p, n in entry.items.filter(project__in=project_ids_with(ctx.user, TRACKER_READ)).values_list(
            "project__key", "number"
        )
    ]
    ctx.follow(f"knowledge:{entry.pk}")
    return {
        "id": entry.pk,
        "kind": entry.kind,
        "title": entry.title,
        "body": entry.body,
        "version": entry.version,
        "projects": projects,
        "items": items,
        "updated_at": entry.updated_at.isoformat(),
    }


def _items(ctx: ToolContext, keys: list[str]) -> list[Item]:
    numbers = {}
    for key in keys:
        number = item_number(ctx.project, key)
        if number is None:
            raise ToolError("invalid_input", f"items: {key} is not an item key of project {ctx.project.key}.")
        numbers[number] = key
    found = list(Item.objects.filter(project=ctx.project, number__in=numbers))
    missing = sorted(set(numbers) - {item.number for item in found})
    if missing:
        raise NotFoundError(f"Unknown items: {', '.join(numbers[n] for n in missing)}.")
    return found


def create_knowledge(ctx: ToolContext, args: JsonObject) -> JsonObject:
    entry = knowledge_create(
        actor=ctx.actor,
        kind=args["kind"],
        title=args["title"],
        body=args.get("body", ""),
        projects=[ctx.project],
        items=_items(ctx, args.get("items", [])),
    )
    ctx.follow(f"knowledge:{entry.pk}")
    return {"id": entry.pk, "version": entry.version, "title": entry.title}


def update_knowledge(ctx: ToolContext, args: JsonObject) -> JsonObject:
    entry = _entry(ctx, args["id"])
    fields: dict[str, Any] = {k: args[k] for k in ("kind", "title", "body") if k in args}
    if not fields:
        raise ToolError("invalid_input", "Send at least one of kind, title, body.")
    linked = list(entry.projects.all())
    # What the planner writes is readable only where its session's project is (SPEC § 12.3).
    relinked = None if ctx.project in linked else [*linked, ctx.project]
    updated = knowledge_update(
        actor=ctx.actor, entry=entry, version=args["version"], fields=fields, projects=relinked
    )
    ctx.follow(f"knowledge:{entry.pk}")
    return {"id": updated.pk, "version": updated.version, "title": updated.title}


def _schema(properties: JsonObject, required: list[str]) -> JsonObject:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


TITLE: JsonObject = {"type": "string", "minLength": 1, "maxLength": 200}
BODY: JsonObject = {"type": "string", "maxLength": 200000}
ENTRY_ID: JsonObject = {"type": "integer", "minimum": 1}

SPECS = (
    ToolSpec(
        name="search_knowledge",
        description="Search the knowledge base you can read (documents, decisions, notes, debt records) "
        "by meaning and words; optional kind and limit. Results carry id, title, snippet and score.",
        input_schema=_schema(
            {
                "query": {"type": "string", "minLength": 1, "maxLength": 500},
                "kind": KINDS,
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            },
            ["query"],
        ),
        permission=KNOWLEDGE_READ,
        handler=search_knowledge,
    ),
    ToolSpec(
        name="get_knowledge",
        description="Read a knowledge entry: kind, title, body, version, linked projects and items.",
        input_schema=_schema({"id": ENTRY_ID}, ["id"]),
        permission=KNOWLEDGE_READ,
        handler=get_knowledge,
    ),
    ToolSpec(
        name="create_knowledge",
        description="Write a document, decision, note or debt record, linked to this project and to items. "
        "It is attributed to the human you act for.",
        input_schema=_schema(
            {
                "kind": KINDS,
                "title": TITLE,
                "body": BODY,
                "items": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 50},
            },
            ["kind", "title"],
        ),
        permission=KNOWLEDGE_WRITE,
        handler=create_knowledge,
        writes=True,
    ),
    ToolSpec(
        name="update_knowledge",
        description="Change a knowledge entry. Send the version you read; if someone changed it since, "
        "you get a conflict with the current version to read and merge. The entry gets linked to this "
        "project, so from then on only those who can read this project read it.",
        input_schema=_schema(
            {
                "id": ENTRY_ID,
                "version": {"type": "integer", "minimum": 1},
                "kind": KINDS,
                "title": TITLE,
                "body": BODY,
            },
            ["id", "version"],
        ),
        permission=KNOWLEDGE_WRITE,
        handler=update_knowledge,
        writes=True,
    ),
)
