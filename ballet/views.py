"""Views of the process, outside every app: health (do the database and the channel layer answer,
is the relay on it, does the sweep of lapsed leases run?) and the icon."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponsePermanentRedirect, JsonResponse
from django.templatetags.static import static
from django.utils import timezone
from django.views.decorators.http import require_GET

from planner.live import broadcast
from planner.live.hub import hub
from tracker.selectors import lease_sweep_overdue

logger = logging.getLogger(__name__)


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() == (1,)
    except Exception:
        logger.exception("healthz: database check failed")
        return False


def _channel_layer_ok() -> bool:
    try:
        return async_to_sync(broadcast.roundtrip)()
    except Exception:
        logger.exception("healthz: channel layer check failed")
        return False


def _lease_sweep_warning() -> str | None:
    """What is wrong with the sweep of lapsed leases, in words (None: nothing)."""
    try:
        overdue = lease_sweep_overdue(now=timezone.now())
    except Exception:
        logger.exception("healthz: the lease sweep could not be read")
        return None
    if overdue is None:
        return None
    if settings.PRODUCTION_MODE:
        return f"{overdue} Celery beat sends it every 30 s and a worker runs it: is either down?"
    return f"{overdue} The server sweeps every 30 s: see its log."


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database and the channel layer answer and this process's relay is on the
    channel layer (after Redis restarted, it refuses turns until it has joined again), else 503
    naming what failed.

    A sweep of lapsed leases that stopped running is a warning in words, status ``degraded`` but
    still 200: this process serves, and every read counts a lapsed lease as expired meanwhile;
    a 503 on every daphne because beat stopped would take the whole site out of its load balancer."""
    checks = {"database": _database_ok(), "channel_layer": _channel_layer_ok(), "relay": hub.relay.available}
    healthy = all(checks.values())
    body: dict[str, Any] = {"status": "ok" if healthy else "unavailable", "checks": checks}
    if checks["database"] and (warning := _lease_sweep_warning()) is not None:
        body["warnings"] = {"lease_sweep": warning}
        body["status"] = "degraded" if healthy else body["status"]
    return JsonResponse(body, status=200 if healthy else 503)


@require_GET
def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """Browsers ask for /favicon.ico on every page that names no icon (the admin's, the API docs)."""
    return HttpResponsePermanentRedirect(static("tracker/favicon.svg"))
