"""``GET projects/{key}/items/{item_key}/brief/``: a ticket's brief over REST
(``planner/domain/briefs.py``)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from planner.domain.briefs import brief_read
from tracker.trust.permissions import TRACKER_READ
from tracker.web.apis.base import READ_ERRORS, BalletApi, caller, project_for, with_errors

BRIEF = OpenApiResponse(
    response=OpenApiTypes.OBJECT,
    description="ticket (criteria, policy), epic, milestone, blockers (each with its final report), "
    "blocks, claim, reports, knowledge (bodies included), questions (answered), skills (name, version).",
)


class ItemBriefApi(BalletApi):
    @extend_schema(
        summary="Everything a worker needs to start a ticket, in one call",
        responses=with_errors({200: BRIEF}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str, item_key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        return Response(brief_read(reader=caller(request), project=project, item_key=item_key))
