"""MCP's reads answer what REST answers (docs/agents.md#one-shape): the same selectors and the same
serializers, so an agent parses one object whichever way it asked; a list pages by ``limit`` and
``offset`` and answers REST's envelope less its links (``{count, limit, offset, results}``).

Each tool keeps the planner's name, permission and input (plus the paging every list takes); only
its handler is REST's read. The planner's own chat keeps its compact views of the same tools.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from rest_framework import serializers

from knowledge.selectors import knowledge_get, knowledge_links, knowledge_revision_list
from knowledge.serializers import KnowledgeDetailSerializer
from planner.domain.tools import TOOLS
from planner.domain.tools.base import JsonObject, ToolContext, ToolSpec
from planner.domain.tools.plan import search_hits
from tracker.inputs import DEFAULT_LIMIT, MAX_LIMIT, MAX_OFFSET
from tracker.selectors import (
    changeset_list,
    item_dependencies,
    item_get,
    item_list,
    runnable_tickets,
)
from tracker.web.serializers import (
    ChangesetSerializer,
    ItemDetailSerializer,
    ItemSerializer,
    SearchResultsSerializer,
)

LIMIT: JsonObject = {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}
OFFSET: JsonObject = {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET}
PAGING = (
    f"Pages by limit (default {DEFAULT_LIMIT}, at most {MAX_LIMIT}) and offset; answers "
    "{count, limit, offset, results}."
)


def paged(
    rows: QuerySet[Any] | list[Any],
    serializer: type[serializers.BaseSerializer[Any]],
    args: JsonObject,
    context: Callable[[list[Any]], dict[str, Any]] | None = None,
) -> JsonObject:
    """A page of ``rows`` as REST's paginator answers it, less the links MCP has no use for."""
    limit, offset = args.get("limit", DEFAULT_LIMIT), args.get("offset", 0)
    count = rows.count() if isinstance(rows, QuerySet) else len(rows)
    page = list(rows[offset : offset + limit]) if offset < count else []
    data = serializer(page, many=True, context=context(page) if context else {}).data
    return {"count": count, "limit": limit, "offset": offset, "results": [dict(row) for row in data]}


def list_runnable(ctx: ToolContext, args: JsonObject) -> JsonObject:
    return paged(runnable_tickets(project=ctx.project), ItemSerializer, args)


def list_items(ctx: ToolContext, args: JsonObject) -> JsonObject:
    rows = item_list(
        project=ctx.project,
        kind=args.get("kind"),
        state=args.get("state"),
        epic=args.get("epic"),
        milestone=args.get("milestone"),
    )
    return paged(rows, ItemSerializer, args)


def get_item(ctx: ToolContext, args: JsonObject) -> JsonObject:
    item = item_get(project=ctx.project, key=args["key"])
    return dict(ItemDetailSerializer(item, context={"dependencies": item_dependencies(item=item)}).data)


def list_changesets(ctx: ToolContext, args: JsonObject) -> JsonObject:
    return paged(changeset_list(project=ctx.project, status=args.get("status")), ChangesetSerializer, args)


def get_knowledge(ctx: ToolContext, args: JsonObject) -> JsonObject:
    entry = knowledge_get(user=ctx.reader, entry_id=args["id"], organization_id=ctx.project.organization_id)
    context = {
        "links": knowledge_links(user=ctx.reader, entry_ids=[entry.pk]),
        "revisions": knowledge_revision_list(entry=entry),
    }
    return dict(KnowledgeDetailSerializer(entry, context=context).data)


def search_project(ctx: ToolContext, args: JsonObject) -> JsonObject:
    return dict(SearchResultsSerializer({"results": search_hits(ctx, args)}).data)


def _paging(schema: JsonObject) -> JsonObject:
    properties = {**schema.get("properties", {}), "limit": LIMIT, "offset": OFFSET}
    return {**schema, "properties": properties}


def _as_rest(name: str, handler: Callable[[ToolContext, JsonObject], JsonObject], *, lists: bool) -> ToolSpec:
    """The planner's tool ``name`` with REST's read for its handler (and REST's paging for a list)."""
    spec = TOOLS[name]
    schema, description = spec.input_schema, spec.description
    if lists:
        schema, description = _paging(schema), f"{description} {PAGING}"
    return dataclasses.replace(
        spec, description=description, input_schema=schema, handler=handler, reads=None
    )


READS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        _as_rest("list_runnable", list_runnable, lists=True),
        _as_rest("list_items", list_items, lists=True),
        _as_rest("get_item", get_item, lists=False),
        _as_rest("list_changesets", list_changesets, lists=True),
        _as_rest("get_knowledge", get_knowledge, lists=False),
        _as_rest("search_project", search_project, lists=False),
    )
}
