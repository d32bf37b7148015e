"""A project's events over REST (docs/events.md#the-feed): the feed, which may wait for the next
events, and the same as Server-Sent Events. Both wait on the event loop, holding no thread and no
database connection (``planner/live/event_waits.py``); each read checks the reader's access."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from planner.ground.bridge import db
from planner.live.event_waits import MAX_WAIT_SECONDS, events_await, events_follow
from planner.web.async_api import AsyncBalletApi
from tracker.errors import BalletError
from tracker.event_selectors import MAX_EVENTS, EventPage, event_head, events_after
from tracker.selectors import project_by_id
from tracker.services.events import EVENT_TYPES
from tracker.trust.limits import agent_request_count
from tracker.trust.permissions import TRACKER_READ, key_bind, key_bound
from tracker.web.apis.base import READ_ERRORS, caller, parse, project_for, with_errors

KEEP_ALIVE_SECONDS = 25.0  # a comment line this often keeps proxies from closing an idle stream


def _types(value: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(name.strip() for name in value.split(",") if name.strip()))
    unknown = [name for name in names if name not in EVENT_TYPES]
    if unknown:
        raise serializers.ValidationError(
            f"Unknown event types: {', '.join(name[:60] for name in unknown[:5])}; "
            f"the types are {', '.join(EVENT_TYPES)}."
        )
    return names


class EventQuerySerializer(serializers.Serializer[Any]):
    after = serializers.CharField(
        required=False,
        max_length=20,
        help_text="Answer the events after this id (0: from the first); now: only those to come.",
    )
    types = serializers.CharField(
        required=False, max_length=2000, help_text="Comma-separated event types; all when absent."
    )
    wait = serializers.FloatField(
        required=False,
        min_value=0,
        max_value=MAX_WAIT_SECONDS,
        default=0,
        help_text="Seconds to wait for the first event when there is none yet.",
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_EVENTS, default=MAX_EVENTS)

    def validate_after(self, value: str) -> str:
        if value != "now" and not (value.isascii() and value.isdigit()):
            raise serializers.ValidationError("Expected an event id (a whole number) or now.")
        return value

    def validate_types(self, value: str) -> tuple[str, ...]:
        return _types(value)


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


@dataclass(frozen=True)
class _Query:
    """A reader's query, as first read: the project, the caller and where to start."""

    project_id: int
    user_id: int
    bound: frozenset[int] | None
    after: int
    types: tuple[str, ...]
    limit: int
    wait: float


def _query(request: Request, key: str, params: Any, last_event_id: str | None = None) -> _Query:
    project = project_for(request, key, TRACKER_READ)
    user = caller(request)
    agent_request_count(user_id=user.pk, write=False)
    data = parse(EventQuerySerializer, params)
    resumed = last_event_id if last_event_id and last_event_id.isascii() and last_event_id.isdigit() else None
    after_text = data.get("after") or resumed or "0"
    after = event_head(user=user, project=project) if after_text == "now" else int(after_text)
    return _Query(
        project.pk, user.pk, key_bound(user), after, data.get("types", ()), data["limit"], data["wait"]
    )


def _read(query: _Query, after: int) -> EventPage:
    """The events after ``after``, read as the caller now (a removed reader is refused)."""
    user = User.objects.filter(pk=query.user_id, is_active=True).first()
    reader = key_bind(user, query.bound) if user is not None and query.bound is not None else user
    return events_after(
        user=reader,
        project=project_by_id(query.project_id),
        after=after,
        types=query.types,
        limit=query.limit,
    )


class EventListApi(AsyncBalletApi):
    @extend_schema(
        summary="The project's events after an id; ?wait=SECONDS (up to 60) waits for the first",
        description="Events in id order, those the caller may read (docs/events.md). Read on with "
        "after=next. With wait, an empty answer waits until an event is recorded, in whichever process.",
        parameters=[EventQuerySerializer],
        responses=with_errors({200: EventPageSerializer}, *READ_ERRORS, 429),
    )
    async def get(self, request: Request, key: str) -> Response:
        query = await db(_query)(request, key, request.query_params)
        read = functools.partial(_read, query)
        if query.wait > 0:
            page = await events_await(
                project_id=query.project_id, read=read, after=query.after, seconds=query.wait
            )
        else:
            page = await db(read)(query.after)
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
        query = await db(_query)(request, key, request.query_params, last[:20] if last else None)
        response = StreamingHttpResponse(_stream(query), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # nginx: send each event as it comes
        return response


async def _stream(query: _Query) -> AsyncIterator[bytes]:
    yield b"retry: 3000\n\n"
    pages = events_follow(
        project_id=query.project_id,
        read=functools.partial(_read, query),
        after=query.after,
        idle_seconds=KEEP_ALIVE_SECONDS,
    )
    try:
        async for page in pages:
            if not page.events:
                yield b": keep-alive\n\n"
            for event in page.events:
                yield _frame(event)
    except BalletError as exc:
        body = json.dumps({"error": {"code": exc.code, "message": exc.message}})
        yield f"event: error\ndata: {body}\n\n".encode()
    finally:
        await pages.aclose()


def _frame(event: dict[str, Any]) -> bytes:
    return f"id: {event['id']}\nevent: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
