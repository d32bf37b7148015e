"""Error pages: JSON for the REST API, Django's pages elsewhere."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults


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
