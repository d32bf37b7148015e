"""Error pages: JSON for the REST API, Django's pages elsewhere; no secret on any of them."""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.debug import SafeExceptionReporterFilter


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's own refusals (a body past ``DATA_UPLOAD_MAX_MEMORY_SIZE``, a bad host) before any view."""
    if not request.path.startswith("/api/"):
        return defaults.bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        body = {"error": {"code": "request_too_large", "message": "The request body is too large."}}
        return JsonResponse(body, status=413)
    return JsonResponse({"error": {"code": "bad_request", "message": "Bad request."}}, status=400)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"error": {"code": "not_found", "message": "Not found."}}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        body = {
            "error": {"code": "server_error", "message": "Ballet failed to answer; the error was logged."}
        }
        return JsonResponse(body, status=500)
    return defaults.server_error(request)


# scheme://user:PASSWORD@host: the password of any URL, wherever a setting holds one.
URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s]+@", re.IGNORECASE)


class SecretSafeExceptionReporterFilter(SafeExceptionReporterFilter):
    """Django's filter (settings named like KEY, SECRET, PASS are masked), and passwords in URLs,
    which live in settings named LOCATION, hosts or CELERY_BROKER_URL, masked too."""

    def cleanse_setting(self, key: Any, value: Any) -> Any:
        cleansed = super().cleanse_setting(key, value)
        if isinstance(cleansed, str):  # lazy strings too, hence str()
            return URL_PASSWORD.sub(rf"\g<head>{self.cleansed_substitute}@", str(cleansed))
        return cleansed
