"""Tools over the knowledge base: search_knowledge, get_knowledge, create_knowledge, update_knowledge.

The planner reads what its reader may read (its human, or in a question's
sub-chat what all of that chat's readers may: ``ToolContext.reader``), through
the selectors the REST API uses (:mod:`knowledge.selectors`), limited to the
session's organization.
Knowledge the planner writes is linked to the session's project, so it is
readable only where that project is, and attributed to the human it acts for.
"""

from __future__ import annotations

from typing import Any

from knowledge.models import KnowledgeEntry, KnowledgeKind
from knowledge.selectors import KnowledgeLinks, knowledge_find, knowledge_get, knowledge_links
from knowledge.services import knowledge_create, knowledge_update
from planner.domain.knowledge_cards import knowledge_card
from planner.domain.tools.base import Draft, JsonObject, ToolContext, ToolError, ToolSpec
from tracker.selectors import item_list_by_keys
from tracker.trust.permissions import KNOWLEDGE_READ, KNOWLEDGE_WRITE

KINDS: JsonObject = {"enum": list(KnowledgeKind.values)}


def search_knowledge(ctx: ToolContext, args: JsonObject) -> JsonObject:
    hits = knowledge_find(
        user=ctx.reader,
        organization_id=ctx.project.organization_id,
        query=args["query"],
        kind=args.get("kind"),
        limit=args.get("limit", 10),
    )
    return {
        "results": [
            {
                "id": int(h.key),
                "kind": h.subkind,
                "title": h.title,
                "snippet": h.snippet,
                "score": h.score,
                "related": h.related,
            }
            for h in hits
        ]
    }


def get_knowledge(ctx: ToolContext, args: JsonObject) -> JsonObject:
    entry = knowledge_get(user=ctx.reader, entry_id=args["id"], organization_id=ctx.project.organization_id)
    links = knowledge_links(user=ctx.reader, entry_ids=[entry.pk]).get(entry.pk, KnowledgeLinks())
    ctx.follow(f"knowledge:{entry.pk}")
    return {
        "id": entry.pk,
        "kind": entry.kind,
        "title": entry.title,
        "body": entry.body,
        "version": entry.version,
        "projects": links.projects,
        "items": links.items,
        "updated_at": entry.updated_at.isoformat(),
    }


def create_knowledge(ctx: ToolContext, args: JsonObject) -> JsonObject:
    entry = knowledge_create(
        actor=ctx.actor,
        kind=args["kind"],
        title=args["title"],
        body=args.get("body", ""),
        projects=[ctx.project],
        items=item_list_by_keys(user=ctx.reader, keys=args.get("items", [])),
    )
    ctx.follow(f"knowledge:{entry.pk}")
    _card(ctx, entry)
    return {"id": entry.pk, "version": entry.version, "title": entry.title}


def _card(ctx: ToolContext, entry: KnowledgeEntry) -> None:
    """The write's card in the chat: the entry and what it changed (docs/domain.md#knowledge-cards)."""
    snapshot = knowledge_card(entry, entry.version, project_key=ctx.project.key)
    if snapshot is not None:
        ctx.drafts.append(Draft(kind="knowledge", snapshot=snapshot, artifact_id=f"knowledge:{entry.pk}"))


def update_knowledge(ctx: ToolContext, args: JsonObject) -> JsonObject:
    entry = knowledge_get(user=ctx.reader, entry_id=args["id"], organization_id=ctx.project.organization_id)
    fields: dict[str, Any] = {k: args[k] for k in ("kind", "title", "body") if k in args}
    if not fields:
        raise ToolError("invalid_input", "Send at least one of kind, title, body.")
    linked = list(entry.projects.all())
    # What the planner writes is readable only where its session's project is (docs/trust.md#untrusted-text).
    relinked = None if ctx.project in linked else [*linked, ctx.project]
    updated = knowledge_update(
        actor=ctx.actor, entry=entry, version=args["version"], fields=fields, projects=relinked
    )
    ctx.follow(f"knowledge:{entry.pk}")
    _card(ctx, updated)
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
        "by meaning and words; optional kind and limit. Results carry id, title, snippet and score; "
        "matches come first, then entries only related to the query (related: true).",
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
