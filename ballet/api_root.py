"""``/api/v1/``: the REST API's root, links to its schema, its doc pages and its top-level lists.

It holds links only, no data, so it answers anyone, as the schema it links to does; a caller
that sends a credential still has it checked (a revoked key gets 401 here as everywhere).
It lives here, beside the URL map, because it links every app's lists (docs/architecture.md).
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from tracker.web.apis.base import with_errors
from tracker.web.authentication import KeyAuthentication

# Field of the answer → the name of the URL it links to.
LINKS = {
    "schema": "schema",
    "docs": "schema-docs",
    "redoc": "schema-redoc",
    "projects": "tracker-api:project-list",
    "knowledge": "knowledge-api:knowledge-list",
    "planner_sessions": "planner-api:session-list",
    "keys": "tracker-api:key-list",
}


class ApiRootSerializer(serializers.Serializer[dict[str, str]]):
    schema = serializers.URLField(help_text="The OpenAPI 3 schema.")
    docs = serializers.URLField(help_text="The schema as Swagger UI.")
    redoc = serializers.URLField(help_text="The schema as ReDoc.")
    projects = serializers.URLField(help_text="The projects you can read.")
    knowledge = serializers.URLField(help_text="The knowledge base.")
    planner_sessions = serializers.URLField(help_text="Your planner chats.")
    keys = serializers.URLField(help_text="Your API keys.")


class ApiRootApi(APIView):
    authentication_classes = [KeyAuthentication, SessionAuthentication]
    permission_classes = [AllowAny]

    @extend_schema(
        summary="The API's root: links to the schema, its doc pages and the top-level lists",
        description="Links only, open to anyone; a credential, if sent, must be valid.",
        auth=[],  # open: the doc pages show no lock on it
        responses=with_errors({200: ApiRootSerializer}, 401),
    )
    def get(self, request: Request) -> Response:
        return Response({field: reverse(name, request=request) for field, name in LINKS.items()})
