"""A project's events over REST (docs/events.md#the-feed): the feed, which may wait for the next
events, and the same as Server-Sent Events. Both wait on the event loop, holding no thread and no
database connection, with the other waiters of the project (``planner/live/event_feed.py``).

A request with an API key or a token that waits (``?wait=``) or streams is served in front of
Django by ``event_route.py``, which answers the same; these views serve the rest (a browser's
session, the reads that do not wait) and describe the endpoints in the OpenAPI schema."""

from __future__ import annotations

import json
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from planner.ground.bridge import db
from planner.web.async_api import AsyncBalletApi
from planner.web.event_query import EventQuerySerializer, event_query, event_stream, query_page
from tracker.services.events import EVENT_TYPES
from tracker.web.apis.base import READ_ERRORS, caller, with_errors


class EventSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    type = serializers.ChoiceField(choices=EVENT_TYPES)
    project = serializers.CharField(allow_null=True)
    actor = serializers.CharField()
    target = serializers.CharField()
    created_at = serializers.DateTimeField()
    data = serializers.DictField()  # type: ignore[assignment]  # the event's data, not the serializer's


class EventPageSerializer(serializers.Serializer[Any]):
    events = EventSerializer(many=True)
    next = serializers.IntegerField(help_text="The id to read on from: pass it as after.")


class EventListApi(AsyncBalletApi):
    @extend_schema(
        summary="The project's events after an id; ?wait=SECONDS (up to 60) waits for the first",
        description="Events in id order, those the caller may read (docs/events.md). Read on with "
        "after=next. With wait, an empty answer waits until an event is recorded, in whichever process.",
        parameters=[EventQuerySerializer],
        responses=with_errors({200: EventPageSerializer}, *READ_ERRORS, 429),
    )
    async def get(self, request: Request, key: str) -> Response:
        query = await db(event_query)(caller(request), request.auth, key, request.query_params)
        page = await query_page(query)
        return Response({"events": page.events, "next": page.next})


class EventStreamRenderer(BaseRenderer):
    """What a browser's EventSource asks for (``Accept: text/event-stream``): the stream itself, or
    a refusal before it starts, in the error shape as JSON."""

    media_type = "text/event-stream"
    format = "event-stream"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        return json.dumps(data).encode()


class EventStreamApi(AsyncBalletApi):
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(
        summary="The project's events as Server-Sent Events",
        description="Each event is sent as it is recorded (id: its id; event: its type; data: the event as "
        "JSON), after ?after= or the Last-Event-ID header (a reconnecting EventSource resumes by itself). A "
        "comment line every 25 s keeps the connection alive. The stream ends with an error event when the "
        "caller may no longer read the project.",
        parameters=[EventQuerySerializer],
        responses={
            (200, "text/event-stream"): OpenApiResponse(OpenApiTypes.STR),
            **with_errors({}, *READ_ERRORS),
        },
    )
    async def get(self, request: Request, key: str) -> StreamingHttpResponse:
        last = request.headers.get("Last-Event-ID")
        query = await db(event_query)(
            caller(request), request.auth, key, request.query_params, last[:20] if last else None
        )
        if query.first.error is not None:
            raise query.first.error
        response = StreamingHttpResponse(event_stream(query), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # nginx: send each event as it comes
        return response
