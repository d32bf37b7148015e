"""A query of the events feed (docs/events.md#the-feed), read and checked as REST reads it (the
project readable by the caller, the request counted, the parameters validated, then the first
read), and its answer: the page a wait ends with, or the bytes of the stream. The REST views
(``event_apis.py``) and the feed's own ASGI route (``event_route.py``) both come here, so both
answer the same, refusals included."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.http import QueryDict
from rest_framework import serializers
from rest_framework.authtoken.models import Token

from planner.live.event_feed import FeedAnswer, FeedReader, feed_follow, feed_read, feed_wait
from planner.live.event_waits import MAX_WAIT_SECONDS
from tracker.errors import BalletError, ValidationError, error_body
from tracker.event_selectors import MAX_EVENTS, EventPage, event_head
from tracker.inputs import NUL_MESSAGE, nul_paths
from tracker.models import ApiKey
from tracker.selectors import project_get
from tracker.services.events import EVENT_TYPES
from tracker.trust.limits import agent_request_count
from tracker.trust.permissions import TRACKER_READ, key_bound, require
from tracker.web.apis.base import parse

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


@dataclass(frozen=True)
class EventQuery:
    """A reader's query, as first read: the project, who reads, where from, how long to wait, and
    the answer of the first read."""

    project_id: int
    reader: FeedReader
    after: int
    wait: float
    first: FeedAnswer


def query_nul_check(params: QueryDict) -> None:
    """Refuse NUL in the query before any lookup sees it (``BalletApi.initial`` does it for REST)."""
    refused = [name.replace("\x00", "\\u0000") for name in params if nul_paths([name, *params.getlist(name)])]
    if refused:
        raise ValidationError({name: [NUL_MESSAGE] for name in refused})


def event_query(
    user: User, auth: object, key: str, params: QueryDict, last_event_id: str | None = None
) -> EventQuery:
    """The query of ``user`` (authenticated by ``auth``: an API key, a legacy token, or None for a
    session) on project ``key``, checked in REST's order (404/403, 429, 400), with its first read.
    On the database threads."""
    project = project_get(key=key)
    require(user, project, TRACKER_READ)
    agent_request_count(user_id=user.pk, write=False)
    data = parse(EventQuerySerializer, params)
    if not math.isfinite(data["wait"]):
        raise ValidationError({"wait": [f"Expected a number of seconds from 0 to {MAX_WAIT_SECONDS}."]})
    resumed = last_event_id if last_event_id and last_event_id.isascii() and last_event_id.isdigit() else None
    after_text = data.get("after") or resumed or "0"
    after = event_head(user=user, project=project) if after_text == "now" else int(after_text)
    reader = FeedReader(
        user_id=user.pk,
        bound=key_bound(user),
        types=data.get("types", ()),
        limit=data["limit"],
        key_id=auth.pk if isinstance(auth, ApiKey) else None,
        token=auth.key if isinstance(auth, Token) else None,
    )
    [first] = feed_read(project.pk, [reader], [after])
    return EventQuery(project.pk, reader, after, data["wait"], first)


async def query_page(query: EventQuery) -> EventPage:
    """The first read's page, or the one a wait ends with; raises what refuses the reader."""
    if query.first.error is not None:
        raise query.first.error
    page = query.first.page
    assert page is not None
    if page.events or query.wait <= 0:
        return page
    return await feed_wait(
        project_id=query.project_id, reader=query.reader, after=page.next, seconds=query.wait
    )


async def event_stream(query: EventQuery) -> AsyncGenerator[bytes, None]:
    """The stream's bytes: the retry field, the events as they come, a comment when idle, and an
    ``error`` event when the reader is refused (the stream ends)."""
    yield b"retry: 3000\n\n"
    first = query.first.page
    assert first is not None
    for event in first.events:
        yield frame(event)
    pages = feed_follow(
        project_id=query.project_id,
        reader=query.reader,
        after=first.next,
        idle_seconds=KEEP_ALIVE_SECONDS,
        caught_up=not query.first.more,
    )
    try:
        async for page in pages:
            if not page.events:
                yield b": keep-alive\n\n"
            for event in page.events:
                yield frame(event)
    except BalletError as exc:
        yield f"event: error\ndata: {json.dumps(error_body(exc.code, exc.message))}\n\n".encode()
    finally:
        await pages.aclose()


def frame(event: dict[str, Any]) -> bytes:
    return f"id: {event['id']}\nevent: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
