"""Knowledge over REST: search and list, create, read with revisions, update at a version."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from knowledge.models import KnowledgeEntry
from knowledge.selectors import knowledge_get, knowledge_links, knowledge_list, knowledge_revision_list
from knowledge.serializers import (
    KnowledgeCreateSerializer,
    KnowledgeDetailSerializer,
    KnowledgeEntrySerializer,
    KnowledgeFilterSerializer,
    KnowledgeUpdateSerializer,
)
from knowledge.services import knowledge_create, knowledge_update
from tracker.errors import ValidationError
from tracker.models import Project
from tracker.selectors import item_list_by_keys
from tracker.trust.permissions import KNOWLEDGE_READ, AnyUser, visible_projects
from tracker.web.apis.base import (
    READ_ERRORS,
    WRITE_ERRORS,
    BalletApi,
    actor_for,
    caller,
    parse,
    project_for,
    with_errors,
)


def _projects(user: AnyUser, keys: Iterable[str]) -> list[Project]:
    """The projects ``keys`` name; the ones the caller cannot read are as unknown as missing ones."""
    wanted = list(dict.fromkeys(keys))
    found = {p.key: p for p in visible_projects(user).filter(key__in=wanted)}
    missing = [key for key in wanted if key not in found]
    if missing:
        raise ValidationError({"projects": [f"Unknown project {key}." for key in missing]})
    return [found[key] for key in wanted]


def _links(request: Request, entries: list[KnowledgeEntry]) -> dict[str, Any]:
    """The serializer context of ``entries``: the links the caller sees."""
    return {"links": knowledge_links(user=caller(request), entry_ids=[entry.pk for entry in entries])}


def _detail(request: Request, entry: KnowledgeEntry, code: int = status.HTTP_200_OK) -> Response:
    fresh = knowledge_get(user=caller(request), entry_id=entry.pk)
    context = {**_links(request, [fresh]), "revisions": knowledge_revision_list(entry=fresh)}
    return Response(KnowledgeDetailSerializer(fresh, context=context).data, status=code)


class KnowledgeListApi(BalletApi):
    @extend_schema(
        summary="List and search the knowledge you can read",
        parameters=[KnowledgeFilterSerializer],
        responses=with_errors({200: KnowledgeEntrySerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request) -> Response:
        filters = parse(KnowledgeFilterSerializer, request.query_params)
        key = filters.get("project")
        project = project_for(request, key, KNOWLEDGE_READ) if key else None
        entries = knowledge_list(
            user=caller(request), kind=filters.get("kind"), project=project, q=filters.get("q")
        )
        return self.paginated(
            entries, KnowledgeEntrySerializer, page_context=lambda page: _links(request, page)
        )

    @extend_schema(
        summary="Write a knowledge entry",
        description="Needs knowledge.write in every linked project.",
        request=KnowledgeCreateSerializer,
        responses=with_errors({201: KnowledgeDetailSerializer}, *WRITE_ERRORS),
    )
    def post(self, request: Request) -> Response:
        data = parse(KnowledgeCreateSerializer, request.data)
        user = caller(request)
        entry = knowledge_create(
            actor=actor_for(request),
            kind=data["kind"],
            title=data["title"],
            body=data["body"],
            projects=_projects(user, data["projects"]),
            items=item_list_by_keys(user=user, keys=data["items"]),
        )
        return _detail(request, entry, status.HTTP_201_CREATED)


class KnowledgeDetailApi(BalletApi):
    @extend_schema(
        summary="Read a knowledge entry with its revisions and links",
        responses=with_errors({200: KnowledgeDetailSerializer}, *READ_ERRORS),
    )
    def get(self, request: Request, entry_id: int) -> Response:
        return _detail(request, knowledge_get(user=caller(request), entry_id=entry_id))

    @extend_schema(
        summary="Change a knowledge entry at the version you read",
        description=(
            "Send the version you read. A stale version answers 409 with the entry as it is now in "
            "error.current. projects and items, when sent, replace the links."
        ),
        request=KnowledgeUpdateSerializer,
        responses=with_errors({200: KnowledgeDetailSerializer}, *WRITE_ERRORS, 409),
    )
    def patch(self, request: Request, entry_id: int) -> Response:
        user = caller(request)
        entry = knowledge_get(user=user, entry_id=entry_id)
        data = parse(KnowledgeUpdateSerializer, request.data)
        entry = knowledge_update(
            actor=actor_for(request),
            entry=entry,
            version=data.pop("version"),
            projects=_projects(user, data.pop("projects")) if "projects" in data else None,
            items=item_list_by_keys(user=user, keys=data.pop("items")) if "items" in data else None,
            fields=data,
        )
        return _detail(request, entry)
