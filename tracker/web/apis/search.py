"""Hybrid search over a project's items and skills (docs/protocol.md#the-rest-side, docs/search.md)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from tracker.models import ItemKind
from tracker.search import ITEM, SKILL
from tracker.selectors import project_find
from tracker.trust.permissions import TRACKER_READ
from tracker.web.apis.base import READ_ERRORS, BalletApi, caller, parse, project_for, with_errors
from tracker.web.serializers import SearchFilterSerializer, SearchResultsSerializer


class ProjectSearchApi(BalletApi):
    @extend_schema(
        summary="Search a project's items and skills",
        description="Lexical (full-text) and semantic (sentence embeddings) rankings fused by reciprocal "
        "rank; an exact item key comes first. Skills need skill.read.",
        parameters=[SearchFilterSerializer],
        responses=with_errors({200: SearchResultsSerializer}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        filters = parse(SearchFilterSerializer, request.query_params)
        wanted = set(filters.get("kind") or (ITEM, SKILL))
        item_kinds = wanted & set(ItemKind.values) if ITEM not in wanted else set()
        kinds = ({ITEM} if wanted - {SKILL} else set()) | (wanted & {SKILL})
        hits = project_find(
            user=caller(request),
            project=project,
            query=filters["q"],
            kinds=kinds,
            item_kinds=item_kinds,
            states=filters.get("state") or (),
            limit=filters["limit"],
        )
        return Response(SearchResultsSerializer({"results": hits}).data)
