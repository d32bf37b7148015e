"""A project's webhooks over REST (docs/events.md#webhooks): list, register (the answer holds the
secret, once), read, change, delete; the deliveries with every attempt; deliver again; ping.

Owners only (``project.admin``): 404 for whoever cannot read the project, 403 for a reader who
is no owner. No API key manages webhooks (``scopes``: None), as none manages members: a webhook
sends the project's events wherever its URL says, and its log holds what receivers answered.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from tracker.services.webhook_endpoints import (
    delivery_redeliver,
    webhook_create,
    webhook_delete,
    webhook_ping,
    webhook_update,
)
from tracker.trust.permissions import PROJECT_ADMIN
from tracker.web.apis.base import (
    READ_ERRORS,
    WRITE_ERRORS,
    BalletApi,
    actor_for,
    parse,
    project_for,
    with_errors,
)
from tracker.web.webhook_serializers import (
    DeliverySerializer,
    WebhookCreatedSerializer,
    WebhookCreateSerializer,
    WebhookSerializer,
    WebhookUpdateSerializer,
)
from tracker.webhook_selectors import delivery_list, webhook_get, webhook_list

NEEDS = "Needs project.admin."


class WebhookListApi(BalletApi):
    scopes = {"GET": None, "POST": None}

    @extend_schema(
        summary="The project's webhooks (never their secrets)",
        description=NEEDS,
        responses=with_errors({200: WebhookSerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        return self.paginated(webhook_list(project=project), WebhookSerializer)

    @extend_schema(
        summary="Register a webhook: the answer holds its secret, shown this once",
        description=f"{NEEDS} Deliveries are signed as Standard Webhooks with the secret.",
        request=WebhookCreateSerializer,
        responses=with_errors({201: WebhookCreatedSerializer}, *WRITE_ERRORS),
    )
    def post(self, request: Request, key: str) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        data = parse(WebhookCreateSerializer, request.data)
        hook, secret = webhook_create(actor=actor_for(request), project=project, **data)
        body = {**WebhookSerializer(hook).data, "secret": secret}
        return Response(body, status=status.HTTP_201_CREATED)


class WebhookDetailApi(BalletApi):
    scopes = {"GET": None, "PATCH": None, "DELETE": None}

    @extend_schema(
        summary="A webhook (never its secret)",
        description=NEEDS,
        responses=with_errors({200: WebhookSerializer}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str, webhook_id: int) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        return Response(WebhookSerializer(webhook_get(project=project, webhook_id=webhook_id)).data)

    @extend_schema(
        summary="Change a webhook's name, URL, types or format, or enable or disable it",
        description=f"{NEEDS} Disabled, its pending deliveries fail; enabled again, it starts afresh.",
        request=WebhookUpdateSerializer,
        responses=with_errors({200: WebhookSerializer}, *WRITE_ERRORS),
    )
    def patch(self, request: Request, key: str, webhook_id: int) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        data = parse(WebhookUpdateSerializer, request.data)
        hook = webhook_update(actor=actor_for(request), project=project, webhook_id=webhook_id, **data)
        return Response(WebhookSerializer(hook).data)

    @extend_schema(
        summary="Delete a webhook with its deliveries",
        description=NEEDS,
        responses=with_errors({204: None}, *WRITE_ERRORS),
    )
    def delete(self, request: Request, key: str, webhook_id: int) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        webhook_delete(actor=actor_for(request), project=project, webhook_id=webhook_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookDeliveryListApi(BalletApi):
    scopes = {"GET": None}

    @extend_schema(
        summary="A webhook's deliveries, newest first, with every attempt",
        description=f"{NEEDS} Each attempt: the status code, how long it took, the first KB of the "
        "answer, and what went wrong.",
        responses=with_errors({200: DeliverySerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str, webhook_id: int) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        hook = webhook_get(project=project, webhook_id=webhook_id)
        return self.paginated(delivery_list(webhook=hook), DeliverySerializer)


class WebhookRedeliverApi(BalletApi):
    scopes = {"POST": None}

    @extend_schema(
        summary="Deliver a delivery again, with the same webhook-id",
        description=f"{NEEDS} It goes out in order, after what is pending; 409 while the webhook is "
        "disabled.",
        request=None,
        responses=with_errors({202: DeliverySerializer}, *WRITE_ERRORS, 409),
    )
    def post(self, request: Request, key: str, webhook_id: int, delivery_id: int) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        delivery = delivery_redeliver(
            actor=actor_for(request), project=project, webhook_id=webhook_id, delivery_id=delivery_id
        )
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)


class WebhookPingApi(BalletApi):
    scopes = {"POST": None}

    @extend_schema(
        summary="Send a test delivery of type ping",
        description=f"{NEEDS} Its attempts show in the deliveries; 409 while the webhook is disabled.",
        request=None,
        responses=with_errors({202: DeliverySerializer}, *WRITE_ERRORS, 409),
    )
    def post(self, request: Request, key: str, webhook_id: int) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        delivery = webhook_ping(actor=actor_for(request), project=project, webhook_id=webhook_id)
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)
