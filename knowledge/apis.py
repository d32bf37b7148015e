"""Knowledge over REST: search and list, create, read with revisions, update at a version."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from knowledge.models import KnowledgeEntry
from knowledge.selectors import knowledge_get, knowledge_list
from knowledge.serializers import (
    KnowledgeCreateSerializer,
    KnowledgeDetailSerializer,
    KnowledgeEntrySerializer,
    KnowledgeFilterSerializer,
    KnowledgeUpdateSerializer,
)
from knowledge.services import knowledge_create, knowledge_update
from tracker.apis.base import (
    READ_ERRORS,
    WRITE_ERRORS,
    BalletApi,
    actor_for,
    caller,
    parse,
    project_for,
    with_errors,
)
from tracker.errors import ValidationError
from tracker.models import Item, Project
from tracker.permissions import KNOWLEDGE_READ, AnyUser, project_ids_with, visible_projects
from tracker.selectors import item_number


def _projects(user: AnyUser, keys: Iterable[str]) -> list[Project]:
    """The projects ``keys`` name; the ones the caller cannot read are as unknown as missing ones."""
    wanted = list(dict.fromkeys(keys))
    found = {p.key: p for p in visible_projects(user).filter(key__in=wanted)}
    missing = [key for key in wanted if key not in found]
    if missing:
        raise ValidationError({"projects": [f"Unknown project {key}." for key in missing]})
    return [found[key] for key in wanted]


def _items(user: AnyUser, keys: Iterable[str]) -> list[Item]:
    """The items ``keys`` name, in projects the caller can read, in one query."""
    wanted = list(dict.fromkeys(keys))
    projects = {
        p.key: p for p in visible_projects(user).filter(key__in={k.rpartition("-")[0] for k in wanted})
    }
    refs: dict[str, tuple[int, int]] = {}
    for key in wanted:
        project = projects.get(key.rpartition("-")[0])
        number = item_number(project, key) if project is not None else None
        if project is not None and number is not None:
            refs[key] = (project.pk, number)
    query = Q(pk__in=[])
    for project_id, number in refs.values():
        query |= Q(project_id=project_id, number=number)
    found = {(i.project_id, i.number): i for i in Item.objects.filter(query).select_related("project")}
    missing = [key for key in wanted if refs.get(key) not in found]
    if missing:
        raise ValidationError({"items": [f"Unknown item {key}." for key in missing]})
    return [found[refs[key]] for key in wanted]


def _context(request: Request) -> dict[str, Any]:
    return {"request": request, "readable": set(project_ids_with(caller(request), KNOWLEDGE_READ))}


def _detail(request: Request, entry: KnowledgeEntry, code: int = status.HTTP_200_OK) -> Response:
    fresh = knowledge_get(user=caller(request), entry_id=entry.pk)
    return Response(KnowledgeDetailSerializer(fresh, context=_context(request)).data, status=code)


class KnowledgeListApi(BalletApi):
    @extend_schema(
        summary="List and search the knowledge you can read",
        parameters=[KnowledgeFilterSerializer],
        responses=with_errors({200: KnowledgeEntrySerializer(many=True)}, 400, *READ_ERRORS),
    )
    def get(self, request: Request) -> Response:
        filters = parse(KnowledgeFilterSerializer, request.query_params)
        key = filters.get("project")
        project = project_for(request, key, KNOWLEDGE_READ) if key else None
        entries = knowledge_list(
            user=caller(request), kind=filters.get("kind"), project=project, q=filters.get("q")
        )
        return self.paginated(entries, KnowledgeEntrySerializer, **_context(request))

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
            items=_items(user, data["items"]),
        )
        return _detail(request, entry, status.HTTP_201_CREATED)


class KnowledgeDetailApi(BalletApi):
    @extend_schema(
        summary="Read a knowledge entry with its revisions and links",
        responses=with_errors({200: KnowledgeDetailSerializer}, *READ_ERRORS),
    )
    def get(self, request: Request, entry_id: int) -> Response:
        entry = knowledge_get(user=caller(request), entry_id=entry_id)
        return Response(KnowledgeDetailSerializer(entry, context=_context(request)).data)

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
            items=_items(user, data.pop("items")) if "items" in data else None,
            fields=data,
        )
        return _detail(request, entry)
