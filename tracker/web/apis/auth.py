"""``auth/token/``: scripts exchange a username and password for their legacy API token (docs/protocol.md).

Deprecated: the token acts with its user's full access, without scopes; API
keys (``keys/``, ``docs/api-keys.md``) are scoped, expiring, revocable and may be
bound to projects, and a script holding the token may make them. Tokens work
until ``LEGACY_TOKEN_SUNSET`` (every answer says so in ``Deprecation`` and
``Sunset`` headers); after it this endpoint answers 410 and tokens are refused
(``manage.py retire_tokens`` turns each into an API key).

DRF's own view, with the failed-login limit of docs/trust.md#limits: django-axes refuses
a locked-out username or IP inside ``authenticate``, and marks DRF's request
(not the Django request its middleware sees), so the refusal is answered here.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.authtoken.models import Token
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import CharField, Serializer

from tracker.errors import RateLimitedError, error_body
from tracker.trust.logins import lockout_message
from tracker.web.apis.base import BalletJSONParser, with_errors
from tracker.web.credentials import (
    LEGACY_TOKEN_GONE,
    LEGACY_TOKEN_HEADERS,
    LEGACY_TOKEN_SUNSET,
    legacy_tokens_retired,
)


class TokenSerializer(Serializer[Any]):
    token = CharField(read_only=True)
    deprecated = CharField(read_only=True, help_text="Why and until when; use an API key instead.")


DEPRECATED = (
    f"Deprecated: legacy tokens stop working after {LEGACY_TOKEN_SUNSET.isoformat()}; "
    "use an API key (made at /keys/ or with POST /api/v1/keys/) instead."
)


class AuthTokenApi(ObtainAuthToken):
    # The API's JSON parser (no stack overflow on deep nesting, no NUL), and forms for scripts.
    parser_classes = [BalletJSONParser, FormParser, MultiPartParser]

    @extend_schema(
        summary="Deprecated: exchange a username and password for the legacy token (full access, no scopes)",
        description=f"{DEPRECATED} After that day this answers 410.",
        deprecated=True,
        request=AuthTokenSerializer,
        # 415: a body DRF cannot parse as JSON, a form or multipart (Schemathesis sends such multipart).
        responses=with_errors({200: TokenSerializer}, 400, 410, 415, 429),
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if legacy_tokens_retired():
            return Response(error_body("gone", LEGACY_TOKEN_GONE), status=status.HTTP_410_GONE)
        serializer = self.get_serializer(data=request.data)
        valid = serializer.is_valid()
        if getattr(request, "axes_locked_out", False):
            raise RateLimitedError(lockout_message(request))
        if not valid:
            serializer.is_valid(raise_exception=True)
        token, _ = Token.objects.get_or_create(user=serializer.validated_data["user"])
        return Response({"token": token.key, "deprecated": DEPRECATED}, headers=LEGACY_TOKEN_HEADERS)
