"""The plan, read-only: items with filters, one item with its dependencies, runnable tickets."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from tracker.selectors import item_dependencies, item_get, item_list, runnable_tickets
from tracker.trust.permissions import TRACKER_READ
from tracker.web.apis.base import READ_ERRORS, BalletApi, parse, project_for, with_errors
from tracker.web.serializers import ItemDetailSerializer, ItemFilterSerializer, ItemSerializer


class ItemListApi(BalletApi):
    @extend_schema(
        summary="List a project's items",
        parameters=[ItemFilterSerializer],
        responses=with_errors({200: ItemSerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        filters = parse(ItemFilterSerializer, request.query_params)
        items = item_list(
            project=project,
            kind=filters.get("kind"),
            state=filters.get("state"),
            epic=filters.get("epic"),
            milestone=filters.get("milestone"),
        )
        return self.paginated(items, ItemSerializer)


class ItemDetailApi(BalletApi):
    @extend_schema(
        summary="Read an item with its description, criteria, policy and dependencies",
        responses=with_errors({200: ItemDetailSerializer}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str, item_key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        item = item_get(project=project, key=item_key)
        context = {"dependencies": item_dependencies(item=item)}
        return Response(ItemDetailSerializer(item, context=context).data)


class RunnableListApi(BalletApi):
    @extend_schema(
        summary="List runnable tickets: ready, with every blocker done or cancelled",
        description=(
            "Held by no worker: a ticket whose claim's lease ran out is listed, even while it still "
            "reads in_progress (claiming it ends that claim first)."
        ),
        responses=with_errors({200: ItemSerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        return self.paginated(runnable_tickets(project=project), ItemSerializer)
