"""The API's doc pages, Swagger UI and ReDoc, served whole by Ballet (docs/operations.md#api-docs).

Their scripts and styles come from drf-spectacular-sidecar through the static files, so the pages
work offline and name no other host. Each page carries a Content-Security-Policy as strict as the
pages allow: scripts from this origin only (Swagger UI's start script is a file of its own, the
split view's ``?script``), nothing framed. ReDoc styles itself with ``<style>`` elements it writes
at run time, so its policy allows inline styles (never inline scripts).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerSplitView
from rest_framework.request import Request
from rest_framework.response import Response


def doc_page_policy(*, inline_styles: bool) -> str:
    styles = "style-src 'self' 'unsafe-inline'" if inline_styles else "style-src 'self'"
    return "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            styles,
            "img-src 'self' data:",
            "font-src 'self' data:",
            "connect-src 'self'",
            # ReDoc searches in a worker it starts from a blob.
            "worker-src 'self' blob:",
            "form-action 'self'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ]
    )


class SwaggerDocsPage(SpectacularSwaggerSplitView):
    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().get(request, *args, **kwargs)
        response["Content-Security-Policy"] = doc_page_policy(inline_styles=False)
        return response


class RedocDocsPage(SpectacularRedocView):
    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().get(request, *args, **kwargs)
        response["Content-Security-Policy"] = doc_page_policy(inline_styles=True)
        return response
