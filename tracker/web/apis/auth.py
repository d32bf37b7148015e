"""``auth/token/``: scripts exchange a username and password for their legacy API token (docs/protocol.md).

The token acts with its user's full access, without scopes; API keys (``keys/``,
``docs/api-keys.md``) are scoped, expiring and revocable, and a script holding
the token may make them.

DRF's own view, with the failed-login limit of docs/trust.md#limits: django-axes refuses
a locked-out username or IP inside ``authenticate``, and marks DRF's request
(not the Django request its middleware sees), so the refusal is answered here.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.authtoken.models import Token
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import CharField, Serializer

from tracker.errors import RateLimitedError
from tracker.trust.logins import lockout_message
from tracker.web.apis.base import BalletJSONParser, with_errors


class TokenSerializer(Serializer[Any]):
    token = CharField(read_only=True)


class AuthTokenApi(ObtainAuthToken):
    # The API's JSON parser (no stack overflow on deep nesting, no NUL), and forms for scripts.
    parser_classes = [BalletJSONParser, FormParser, MultiPartParser]

    @extend_schema(
        summary="Exchange a username and password for the legacy API token (full access, no scopes)",
        request=AuthTokenSerializer,
        # 415: a body DRF cannot parse as JSON, a form or multipart (Schemathesis sends such multipart).
        responses=with_errors({200: TokenSerializer}, 400, 415, 429),
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        valid = serializer.is_valid()
        if getattr(request, "axes_locked_out", False):
            raise RateLimitedError(lockout_message(request))
        if not valid:
            serializer.is_valid(raise_exception=True)
        token, _ = Token.objects.get_or_create(user=serializer.validated_data["user"])
        return Response({"token": token.key})
