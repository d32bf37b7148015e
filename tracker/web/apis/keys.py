"""API keys over REST: yours (list, create, revoke) and, for a project's owners, the keys bound to
the project (never a member's other keys; the holder is told when an owner revokes theirs).

No API key manages keys: a key that could make keys could give itself every
scope. Sign in, or use the legacy token of ``auth/token/``. ``docs/api-keys.md``.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from tracker.selectors import key_get, key_list, key_list_of_project
from tracker.services.keys import key_create, key_projects_clean, key_revoke
from tracker.trust.permissions import PROJECT_ADMIN
from tracker.web.apis.base import (
    READ_ERRORS,
    WRITE_ERRORS,
    BalletApi,
    caller,
    parse,
    project_for,
    with_errors,
)
from tracker.web.key_serializers import (
    KeyCreatedSerializer,
    KeyCreateSerializer,
    KeySerializer,
    MemberKeySerializer,
)


class KeyListApi(BalletApi):
    scopes = {"POST": None}

    @extend_schema(
        summary="Your API keys, newest first (never their secrets)",
        responses=with_errors({200: KeySerializer(many=True)}, *READ_ERRORS),  # 404: a page past the end
    )
    def get(self, request: Request) -> Response:
        return self.paginated(key_list(user=caller(request)), KeySerializer)

    @extend_schema(
        summary="Create an API key: the answer holds the key, shown this once",
        description="The key acts as you, within its scopes; with projects (keys of projects you can "
        "read), only in those projects: elsewhere it finds nothing.",
        request=KeyCreateSerializer,
        responses=with_errors({201: KeyCreatedSerializer}, 400, 401, 403),
    )
    def post(self, request: Request) -> Response:
        data = parse(KeyCreateSerializer, request.data)
        user = caller(request)
        data["projects"] = key_projects_clean(user=user, keys=data.get("projects", []))
        key, secret = key_create(user=user, **data)
        return Response({**KeySerializer(key).data, "key": secret}, status=status.HTTP_201_CREATED)


class KeyDetailApi(BalletApi):
    scopes = {"DELETE": None}

    @extend_schema(
        summary="Revoke one of your API keys, at once (again: 204)",
        responses=with_errors({204: None}, *READ_ERRORS),
    )
    def delete(self, request: Request, key_id: int) -> Response:
        key_revoke(key=key_get(keys=key_list(user=caller(request)), key_id=key_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ProjectKeyListApi(BalletApi):
    @extend_schema(
        summary="The API keys bound to the project (never their secrets)",
        description="Needs project.admin. A member's keys not bound to the project are theirs alone.",
        responses=with_errors({200: MemberKeySerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        return self.paginated(key_list_of_project(project=project), MemberKeySerializer)


class ProjectKeyDetailApi(BalletApi):
    scopes = {"DELETE": None}

    @extend_schema(
        summary="Revoke an API key bound to the project, at once (again: 204)",
        description="Needs project.admin. Its holder finds an inbox entry saying so.",
        responses=with_errors({204: None}, *WRITE_ERRORS),
    )
    def delete(self, request: Request, key: str, key_id: int) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        found = key_get(keys=key_list_of_project(project=project), key_id=key_id)
        key_revoke(key=found, by=caller(request), project=project)
        return Response(status=status.HTTP_204_NO_CONTENT)
