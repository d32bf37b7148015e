"""HTTP middleware: each request reads a user's access once, and only for itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase

from tracker.trust.permissions import access_scope

GetResponse = Callable[[HttpRequest], HttpResponseBase | Awaitable[HttpResponseBase]]


class AccessScopeMiddleware:
    """Wraps every request in :func:`access_scope`: the roles the one permission check reads
    are loaded once per request, and never reused by another."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        if self.is_async:
            return self._acall(request)
        with access_scope():
            return self.get_response(request)

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        with access_scope():
            response = self.get_response(request)
            assert not isinstance(response, HttpResponseBase)
            return await response
