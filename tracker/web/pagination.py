"""How every REST list pages (docs/agents.md#one-shape): ``limit`` rows from ``offset``, as MCP's
list tools page, answered in one envelope, ``{count, limit, offset, next, previous, results}``.

``page`` (the page-number paging of earlier versions) still reads page ``page`` of ``limit`` rows
when no ``offset`` is given. Bad paging is a 400 naming the parameter, never a silent default.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param
from rest_framework.views import APIView

from tracker.errors import ValidationError
from tracker.inputs import DEFAULT_LIMIT, MAX_LIMIT, MAX_OFFSET, ascii_number, paging


class LimitOffset(LimitOffsetPagination):
    default_limit = DEFAULT_LIMIT
    max_limit = MAX_LIMIT

    def paginate_queryset(
        self, queryset: QuerySet[Any], request: Request, view: APIView | None = None
    ) -> list[Any] | None:
        self.request = request
        query = request.query_params
        self.limit, self.offset = paging(query.get("limit"), query.get("offset"))
        page = query.get("page")
        if page is not None and query.get("offset") is None:
            number = ascii_number(page.strip(), maximum=MAX_OFFSET)
            if number is None:
                raise ValidationError({"page": ["A whole number from 1 (or page with limit and offset)."]})
            self.offset = min((number - 1) * self.limit, MAX_OFFSET)
        self.count = self.get_count(queryset)
        if self.count == 0 or self.offset > self.count:
            return []
        return list(queryset[self.offset : self.offset + self.limit])

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            {
                "count": self.count,
                "limit": self.limit,
                "offset": self.offset,
                "next": self.get_next_link(),
                "previous": self.get_previous_link(),
                "results": data,
            }
        )

    def get_next_link(self) -> str | None:
        link = super().get_next_link()
        return None if link is None else _without_page(link)

    def get_previous_link(self) -> str | None:
        link = super().get_previous_link()
        return None if link is None else _without_page(link)

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        described = super().get_paginated_response_schema(schema)
        properties = described["properties"]
        described["properties"] = {
            "count": properties["count"],
            "limit": {"type": "integer", "example": DEFAULT_LIMIT},
            "offset": {"type": "integer", "example": 0},
            **{name: value for name, value in properties.items() if name != "count"},
        }
        described["required"] = ["count", "limit", "offset", "results"]
        return described


def _without_page(link: str) -> str:
    return str(remove_query_param(link, "page"))
