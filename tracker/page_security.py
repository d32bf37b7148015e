"""The Content-Security-Policy of the tracker's pages: only this origin's scripts and styles,
nothing inline, nothing framed, so text a user or the model wrote can never run."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.http import HttpRequest, HttpResponse

View = Callable[..., HttpResponse]

POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ]
)


def with_page_csp(view: View) -> View:
    """``view``'s answers carry :data:`POLICY`."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        response = view(request, *args, **kwargs)
        response["Content-Security-Policy"] = POLICY
        return response

    return wrapped
