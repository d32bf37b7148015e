"""The REST API's error shape: ``{"error": {"code", "message", "fields"?, "current"?}}``.

Domain errors (:class:`BalletError`) and DRF's own errors share it, so a
client reads every failure the same way and never sees a traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import InterfaceError, OperationalError, close_old_connections
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from tracker.errors import BalletError, ConflictError, ValidationError, error_body

logger = logging.getLogger(__name__)


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error detail as ``{"path.to.field": [messages]}``."""
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for key, value in detail.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            out.update(_flatten(value, path))
        return out
    if isinstance(detail, list):
        if all(not isinstance(v, dict | list) for v in detail):
            return {prefix or "non_field_errors": [str(v) for v in detail]}
        out = {}
        for index, value in enumerate(detail):
            out.update(_flatten(value, f"{prefix}[{index}]"))
        return out
    return {prefix or "non_field_errors": [str(detail)]}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ValidationError):
        return Response(error_body(exc.code, exc.message, fields=exc.errors), status=exc.status)
    if isinstance(exc, ConflictError):
        return Response(error_body(exc.code, exc.message, current=exc.current), status=exc.status)
    if isinstance(exc, BalletError):
        return Response(error_body(exc.code, exc.message), status=exc.status)
    if isinstance(exc, OperationalError | InterfaceError):
        # The database dropped the connection (a restart, a failover): the request stopped at that
        # statement, its transaction rolled back, and the next request gets a new connection.
        logger.warning("API request met a database error: %s", exc)
        close_old_connections()
        return Response(
            error_body("unavailable", "The database connection dropped; try again in a moment."),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body("invalid", "Invalid input.", fields=_flatten(exc.detail))
    elif isinstance(exc, exceptions.APIException):
        detail = exc.detail
        message = str(detail) if not isinstance(detail, dict | list) else "Request failed."
        response.data = error_body(str(exc.default_code), message)
    if response.status_code >= status.HTTP_500_INTERNAL_SERVER_ERROR:
        logger.error("API error %s", response.status_code)
    return response
