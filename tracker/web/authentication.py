"""The REST API's credentials: API keys and legacy tokens (``tracker/web/credentials.py``), and the
scope an API key needs for each endpoint.

Every endpoint names the scope its methods need in ``BalletApi.scopes``; unnamed,
reading needs ``read`` and writing ``plan``. :class:`KeyScope` refuses a key
without it (403, naming the scope); sessions and legacy tokens are not limited
by scopes. ``docs/api-keys.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from tracker.errors import CredentialError
from tracker.models import Scope
from tracker.web.credentials import credential_authenticate, credential_of, scope_require

if TYPE_CHECKING:  # DRF's settings import this module, and rest_framework.views imports them
    from rest_framework.views import APIView


class KeyAuthentication(BaseAuthentication):
    """``Authorization: Bearer KEY`` (or ``Token``, ``Api-Key``): ``request.auth`` is the API key,
    or the legacy token. Another header is left to session authentication."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        credential = credential_of(request.META.get("HTTP_AUTHORIZATION"))
        if credential is None:
            return None
        try:
            return credential_authenticate(credential)
        except CredentialError as exc:
            raise AuthenticationFailed(exc.message) from exc

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="ballet"'


class KeyScope(BasePermission):
    """An API key may use an endpoint only with the scope the view names for the method."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        scope_for = getattr(view, "scope_for", None)
        scope = scope_for(request.method) if scope_for else Scope.PLAN
        scope_require(request.auth, scope, f"{request.method} {request.path}"[:300])
        return True


class KeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = KeyAuthentication
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": (
                "An API key (ballet_<prefix>.<secret>, made at /keys/ or POST /api/v1/keys/), acting "
                "within its scopes: read (GET of the plan, knowledge, search, questions), ask (asking "
                "and withdrawing questions), work (claims and reports), plan (writes: changesets, "
                "knowledge, skills, planner sessions); bound to projects, only there. Also `Token KEY` or "
                "`Api-Key KEY`. The deprecated legacy token of POST /api/v1/auth/token/ is accepted the same "
                "way, with its user's full access, until its Sunset date."
            ),
        }
