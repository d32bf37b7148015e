"""What every REST endpoint shares: JSON parsing, authentication, the caller, the project lookup, paging.

Key authentication (API keys and legacy tokens) comes first so that a request
without credentials is answered 401 with a ``WWW-Authenticate`` header (DRF takes
the header from the first class; session authentication has none and would make
it 403). What an API key may use is its scopes (``tracker/web/authentication.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, cast

from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import get_doc
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import NotFound, ParseError
from rest_framework.pagination import BasePagination
from rest_framework.parsers import JSONParser
from rest_framework.permissions import SAFE_METHODS, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from tracker.errors import ValidationError
from tracker.inputs import NUL_MESSAGE, nul_paths
from tracker.models import Project, Scope
from tracker.selectors import project_get
from tracker.services.activity import Actor
from tracker.trust.permissions import require
from tracker.web.authentication import KeyAuthentication, KeyScope
from tracker.web.credentials import LEGACY_TOKEN_HEADERS
from tracker.web.serializers import ErrorSerializer

MAX_JSON_DEPTH = 64


def _nests_deeper_than(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


class BalletJSONParser(JSONParser):
    """JSON only, and never nested so deep that decoding or walking it exhausts the stack."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:  # DRF only turns ValueError into a ParseError
            raise ParseError("JSON parse error - the document nests too deep.") from exc
        if _nests_deeper_than(data, MAX_JSON_DEPTH):
            raise ParseError(f"JSON parse error - the document nests deeper than {MAX_JSON_DEPTH} levels.")
        refused = nul_paths(data)  # PostgreSQL stores NUL in neither text nor jsonb: name each field
        if refused:
            raise ValidationError({path or "non_field_errors": [NUL_MESSAGE] for path in refused})
        return data


class ScopedSchema(AutoSchema):
    """An operation's description ends with the scope an API key needs for it (and leaves out
    a base's docstring, BalletApi's or another, which an endpoint without one of its own inherits)."""

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None or not isinstance(self.view, BalletApi):
            return operation
        scope = self.view.scope_for(self.method)
        note = f"API keys need the {scope} scope." if scope else "Not with an API key."
        description = operation.get("description", "")
        view_class = type(self.view)
        if view_class.__doc__ is None and description == get_doc(view_class):
            description = ""
        operation["description"] = f"{description}\n\n{note}" if description else note
        return operation


class BalletApi(APIView):
    """Base of every endpoint: JSON in and out, authenticated callers only, 401 without credentials."""

    authentication_classes = [KeyAuthentication, SessionAuthentication]
    parser_classes = [BalletJSONParser]
    permission_classes = [IsAuthenticated, KeyScope]
    pagination_class = cast("type[BasePagination]", api_settings.DEFAULT_PAGINATION_CLASS)
    schema = ScopedSchema()
    # The scope an API key needs, by HTTP method; a method not named needs read to read and plan
    # to write; None: no API key may (a session or the legacy token must).
    scopes: ClassVar[Mapping[str, Scope | None]] = {}

    def scope_for(self, method: str) -> Scope | None:
        if method in self.scopes:
            return self.scopes[method]
        return Scope.READ if method in SAFE_METHODS else Scope.PLAN

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        """Refuse NUL in the path (nothing is named with one) and the query before any lookup sees it."""
        super().initial(request, *args, **kwargs)
        if nul_paths(kwargs):
            raise NotFound()
        query = request.query_params
        refused = [
            name.replace("\x00", "\\u0000") for name in query if nul_paths([name, *query.getlist(name)])
        ]
        if refused:
            raise ValidationError({name: [NUL_MESSAGE] for name in refused})

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        """An answer to a legacy token says the token is deprecated and when it stops
        (``tracker.web.credentials.LEGACY_TOKEN_SUNSET``, RFC 8594 and RFC 9745)."""
        response = super().finalize_response(request, response, *args, **kwargs)
        if isinstance(getattr(request, "_auth", None), Token):
            for name, value in LEGACY_TOKEN_HEADERS.items():
                response[name] = value
        return response

    def paginated(
        self,
        rows: QuerySet[Any] | list[Any],
        serializer_class: type[serializers.BaseSerializer[Any]],
        page_context: Callable[[list[Any]], dict[str, Any]] | None = None,
    ) -> Response:
        """One page of ``rows`` (a queryset or a list) in the paginator's envelope; ``page_context``
        reads what the serializer needs about the rows of the page (in one query, not one per row)."""
        paginator: BasePagination = self.pagination_class()
        # Paginators slice lists as well as querysets.
        page = list(paginator.paginate_queryset(cast("QuerySet[Any]", rows), self.request, view=self) or [])
        context = {"request": self.request, **(page_context(page) if page_context else {})}
        data = serializer_class(page, many=True, context=context).data
        return paginator.get_paginated_response(data)


def caller(request: Request) -> User:
    """The authenticated human behind the request."""
    user = request.user
    assert isinstance(user, User)
    return user


def actor_for(request: Request) -> Actor:
    return Actor(user=caller(request))


def project_for(request: Request, key: str, permission: str) -> Project:
    """The project ``key`` if the caller holds ``permission``; 404 when they cannot read it."""
    project = project_get(key=key)
    require(caller(request), project, permission)
    return project


def parse(serializer_class: type[serializers.Serializer[Any]], data: Any) -> dict[str, Any]:
    """Validated input, or a ValidationError the error handler turns into field errors."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def with_errors(ok: dict[int, Any], *codes: int) -> dict[int, Any]:
    """Response documentation: the success answers plus the error answers ``codes``."""
    return {**ok, **{code: ErrorSerializer for code in codes}}


# 400: bad input anywhere in the request (a NUL in a query parameter, say); 403: an API key
# without the scope the endpoint needs.
READ_ERRORS = (400, 401, 403, 404)
WRITE_ERRORS = (400, 401, 403, 404)
