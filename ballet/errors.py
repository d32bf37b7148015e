"""Error pages: JSON for the REST API, Django's pages elsewhere."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults


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
