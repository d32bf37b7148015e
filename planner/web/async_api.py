"""The base of the planner's async REST endpoints: those that call the runner or wait.

An endpoint whose handlers are coroutines is served on the event loop, as the
runner is: it awaits the runner directly, and a ``?wait`` sleeps on the loop
holding no thread and no database connection (``docs/domain.md``). Everything
else is :class:`BalletApi`'s: authentication, the scope an API key needs, the
error shape, JSON parsing, the schema. Its database work (authentication
included) runs on the runner's database threads, ``planner/ground/bridge.py``,
the one way from async code to the database (``docs/architecture.md``).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from rest_framework.exceptions import MethodNotAllowed
from rest_framework.request import Request
from rest_framework.response import Response

from planner.ground.bridge import db
from tracker.web.apis.base import BalletApi


class AsyncBalletApi(BalletApi):
    """A :class:`BalletApi` whose handlers are coroutines; they call ``db(...)`` for the ORM."""

    async def dispatch(  # type: ignore[override]  # Django awaits an async view's dispatch
        self, request: HttpRequest, *args: Any, **kwargs: Any
    ) -> Response:
        self.args, self.kwargs = args, kwargs
        drf_request = self.initialize_request(request, *args, **kwargs)
        self.request = drf_request
        self.headers = self.default_response_headers
        try:
            # Authentication reads the database; the scope check and the NUL check follow it.
            await db(self.initial)(drf_request, *args, **kwargs)
            method = (drf_request.method or "").lower()
            handler = getattr(self, method, None) if method in self.http_method_names else None
            if handler is None:
                raise MethodNotAllowed(drf_request.method or "")
            response: Response = await handler(drf_request, *args, **kwargs)
        except Exception as exc:  # mapped to the error shape, or raised again, as DRF's dispatch does
            response = self.handle_exception(exc)
        self.response = self.finalize_response(drf_request, response, *args, **kwargs)
        return self.response

    async def options(self, request: Request, *args: Any, **kwargs: Any) -> Response:  # type: ignore[override]
        return super().options(request, *args, **kwargs)  # the view's metadata: no database
