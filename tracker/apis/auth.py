"""Scripts exchange a username and password for their API token."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from tracker.apis.base import BalletJSONParser, with_errors


class TokenApi(ObtainAuthToken):
    # The API's JSON parser (no stack overflow on deep nesting, no NUL), and forms for scripts.
    parser_classes = [BalletJSONParser, FormParser, MultiPartParser]

    @extend_schema(
        summary="Exchange a username and password for an API token",
        responses=with_errors({200: inline_serializer("Token", {"token": serializers.CharField()})}, 400),
    )
    def post(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().post(request, *args, **kwargs)
