"""A project's effective skills: list, add a version, read the resolved version, pin."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from tracker.models import SkillScope
from tracker.selectors import skill_effective_list, skill_resolve
from tracker.services.skills import skill_pin_set, skill_version_create
from tracker.trust.permissions import SKILL_READ, SKILL_WRITE
from tracker.web.apis.base import (
    READ_ERRORS,
    WRITE_ERRORS,
    BalletApi,
    actor_for,
    parse,
    project_for,
    with_errors,
)
from tracker.web.serializers import (
    SkillDetailSerializer,
    SkillPinSerializer,
    SkillSerializer,
    SkillVersionCreateSerializer,
    SkillVersionSerializer,
)


class SkillListApi(BalletApi):
    @extend_schema(
        summary="List a project's effective skills",
        description="The project's own skills and its organization's; the project's shadow the "
        "organization's of the same name. Each at its pinned version, else the latest.",
        responses=with_errors({200: SkillSerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str) -> Response:
        project = project_for(request, key, SKILL_READ)
        return self.paginated(skill_effective_list(project=project), SkillSerializer)

    @extend_schema(
        summary="Add a version of a skill (creating the skill at version 1)",
        description="Needs skill.write. scope 'organization' writes the organization's skill and needs "
        "skill.write in every project of the organization.",
        request=SkillVersionCreateSerializer,
        responses=with_errors({201: SkillVersionSerializer}, *WRITE_ERRORS),
    )
    def post(self, request: Request, key: str) -> Response:
        project = project_for(request, key, SKILL_WRITE)
        data = parse(SkillVersionCreateSerializer, request.data)
        version = skill_version_create(
            actor=actor_for(request),
            project=project,
            name=data["name"],
            body=data["body"],
            organization_scope=data["scope"] == SkillScope.ORGANIZATION,
        )
        return Response(SkillVersionSerializer(version).data, status=status.HTTP_201_CREATED)


class SkillDetailApi(BalletApi):
    @extend_schema(
        summary="Read a skill in the version the project uses",
        responses=with_errors({200: SkillDetailSerializer}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str, name: str) -> Response:
        project = project_for(request, key, SKILL_READ)
        return Response(SkillDetailSerializer(skill_resolve(project=project, name=name)).data)

    @extend_schema(
        summary="Pin the project to a version of the skill, or unpin it",
        description="Needs skill.write.",
        request=SkillPinSerializer,
        responses=with_errors({200: SkillDetailSerializer}, *WRITE_ERRORS),
    )
    def patch(self, request: Request, key: str, name: str) -> Response:
        project = project_for(request, key, SKILL_WRITE)
        data = parse(SkillPinSerializer, request.data)
        skill = skill_resolve(project=project, name=name).skill
        skill_pin_set(actor=actor_for(request), project=project, skill=skill, version=data["pin"])
        return Response(SkillDetailSerializer(skill_resolve(project=project, name=name)).data)
