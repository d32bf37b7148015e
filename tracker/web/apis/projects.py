"""Projects and their members: list, read, settings and credential, members' roles (joining: an
invitation, ``members.py``)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from tracker.models import Membership
from tracker.services.projects import membership_remove, membership_set, project_update
from tracker.trust.permissions import PROJECT_ADMIN, TRACKER_READ, visible_projects
from tracker.web.apis.base import (
    READ_ERRORS,
    WRITE_ERRORS,
    BalletApi,
    actor_for,
    caller,
    parse,
    project_for,
    with_errors,
)
from tracker.web.serializers import (
    MembershipSerializer,
    MembershipSetSerializer,
    ProjectSerializer,
    ProjectUpdateSerializer,
)


class ProjectListApi(BalletApi):
    @extend_schema(
        summary="List the projects you can read",
        responses=with_errors({200: ProjectSerializer(many=True)}, *READ_ERRORS),  # 404: a page past the end
    )
    def get(self, request: Request) -> Response:
        return self.paginated(visible_projects(caller(request)), ProjectSerializer)


class ProjectDetailApi(BalletApi):
    scopes = {"PATCH": None}  # settings and the credential: not with an API key

    @extend_schema(summary="Read a project", responses=with_errors({200: ProjectSerializer}, *READ_ERRORS))
    def get(self, request: Request, key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        return Response(ProjectSerializer(project, context={"request": request}).data)

    @extend_schema(
        summary="Change a project's name, description, planner settings or credential",
        description="Needs project.admin. The credential is write-only: answers show has_credential.",
        request=ProjectUpdateSerializer,
        responses=with_errors({200: ProjectSerializer}, *WRITE_ERRORS),
    )
    def patch(self, request: Request, key: str) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        data = parse(ProjectUpdateSerializer, request.data)
        if "settings" in data:
            # PATCH semantics: change the keys sent, keep the others; null removes one.
            data["settings"] = {**project.settings, **data["settings"]}
        project = project_update(actor=actor_for(request), project=project, **data)
        return Response(ProjectSerializer(project, context={"request": request}).data)


class MemberListApi(BalletApi):
    scopes = {"POST": None}  # who may do what: not with an API key

    @extend_schema(
        summary="List a project's members",
        responses=with_errors({200: MembershipSerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        members = Membership.objects.filter(project=project).select_related("user").order_by("user__username")
        return self.paginated(members, MembershipSerializer)

    @extend_schema(
        summary="Change a member's role",
        description="Needs project.admin. A user who is not a member is refused (400): nobody joins a "
        "project without accepting; invite them with POST projects/{key}/invitations/.",
        request=MembershipSetSerializer,
        responses=with_errors({201: MembershipSerializer}, *WRITE_ERRORS),
    )
    def post(self, request: Request, key: str) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        data = parse(MembershipSetSerializer, request.data)
        membership = membership_set(actor=actor_for(request), project=project, **data)
        return Response(MembershipSerializer(membership).data, status=status.HTTP_201_CREATED)


class MemberDetailApi(BalletApi):
    scopes = {"DELETE": None}

    @extend_schema(
        summary="Remove a member",
        description="Needs project.admin.",
        responses=with_errors({204: None}, *WRITE_ERRORS),
    )
    def delete(self, request: Request, key: str, username: str) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        membership_remove(actor=actor_for(request), project=project, username=username)
        return Response(status=status.HTTP_204_NO_CONTENT)
