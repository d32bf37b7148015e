"""Views of the process, outside every app: health (do the database and the channel layer answer,
is the relay on it?) and the icon."""

from __future__ import annotations

import asyncio
import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection
from django.http import HttpRequest, HttpResponsePermanentRedirect, JsonResponse
from django.templatetags.static import static
from django.views.decorators.http import require_GET

from planner.live.hub import hub

logger = logging.getLogger(__name__)


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() == (1,)
    except Exception:
        logger.exception("healthz: database check failed")
        return False


async def _channel_layer_roundtrip() -> bool:
    layer = get_channel_layer()
    if layer is None:
        return False
    # The default prefix: channels-redis reads all of a process's channels of one prefix with a
    # single receive loop (the planner's relay, once it runs); a channel of another prefix
    # would wait for that loop's lock and never be read.
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "healthz.ping"})
    message = await asyncio.wait_for(layer.receive(channel), timeout=2)
    return message.get("type") == "healthz.ping"


def _channel_layer_ok() -> bool:
    try:
        return async_to_sync(_channel_layer_roundtrip)()
    except Exception:
        logger.exception("healthz: channel layer check failed")
        return False


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database and the channel layer answer and this process's relay is on the
    channel layer (after Redis restarted, it refuses turns until it has joined again), else 503
    naming what failed."""
    checks = {"database": _database_ok(), "channel_layer": _channel_layer_ok(), "relay": hub.relay.available}
    healthy = all(checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "unavailable", "checks": checks},
        status=200 if healthy else 503,
    )


@require_GET
def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """Browsers ask for /favicon.ico on every page that names no icon (the admin's, the API docs)."""
    return HttpResponsePermanentRedirect(static("tracker/favicon.svg"))
