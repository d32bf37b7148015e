"""The plan: items with filters, one item with its dependencies and its edit (``PATCH``), runnable
tickets. An edit is a changeset applied at once or proposed (tracker.services.item_edits)."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from tracker.models import Scope
from tracker.selectors import item_dependencies, item_get, item_list, runnable_tickets
from tracker.services.item_edits import item_edit
from tracker.trust.permissions import TRACKER_READ, TRACKER_WRITE
from tracker.web.apis.base import (
    READ_ERRORS,
    WRITE_ERRORS,
    BalletApi,
    actor_for,
    parse,
    project_for,
    with_errors,
)
from tracker.web.serializers import (
    ItemDetailSerializer,
    ItemEditedSerializer,
    ItemEditProposedSerializer,
    ItemFilterSerializer,
    ItemPatchSerializer,
    ItemSerializer,
)


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
            priority=filters.get("priority"),
            label=filters.get("label"),
        )
        return self.paginated(items, ItemSerializer)


class ItemDetailApi(BalletApi):
    # An edit is a plan change, as a changeset is.
    scopes = {"GET": Scope.READ, "PATCH": Scope.PLAN}

    @extend_schema(
        summary="Read an item with its description, criteria, policy and dependencies",
        responses=with_errors({200: ItemDetailSerializer}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str, item_key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        item = item_get(project=project, key=item_key)
        context = {"dependencies": item_dependencies(item=item)}
        return Response(ItemDetailSerializer(item, context=context).data)

    @extend_schema(
        summary="Edit an item at the version you read",
        description=(
            "Needs tracker.write (policy needs policy.set). The edit becomes a changeset: applied at "
            "once by you (200, the item) where the project's direct_edits allows it and four eyes is "
            "off, else proposed for review (202, the changeset's number and review URL). State moves "
            "follow the allowed transitions. A stale version is a 409 with the current version, and "
            "changes nothing."
        ),
        request=ItemPatchSerializer,
        responses=with_errors(
            {200: ItemEditedSerializer, 202: ItemEditProposedSerializer}, *WRITE_ERRORS, 409
        ),
    )
    def patch(self, request: Request, key: str, item_key: str) -> Response:
        project = project_for(request, key, TRACKER_WRITE)
        item = item_get(project=project, key=item_key)
        data: dict[str, Any] = parse(ItemPatchSerializer, request.data)
        version = data.pop("version")
        add, remove = data.pop("add_blockers", []), data.pop("remove_blockers", [])
        outcome = item_edit(
            actor=actor_for(request),
            item=item,
            version=version,
            fields=data,
            add_blockers=add,
            remove_blockers=remove,
        )
        number = outcome.changeset.number
        if not outcome.applied:
            url = reverse("changeset-review", args=[project.key, number])
            body = {"changeset": number, "applied": False, "review_url": url}
            return Response(body, status=status.HTTP_202_ACCEPTED)
        item = item_get(project=project, key=item.key)
        context = {"dependencies": item_dependencies(item=item)}
        body = {**ItemDetailSerializer(item, context=context).data, "changeset": number, "applied": True}
        return Response(body)


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
