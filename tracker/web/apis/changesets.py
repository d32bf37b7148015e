"""Changesets over REST: list, propose, read, the impact of applying, apply, reject."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from tracker.errors import ConflictError
from tracker.graph.impact import changeset_impact
from tracker.models import ChangesetStatus
from tracker.selectors import changeset_get, changeset_list
from tracker.services.changesets import changeset_apply, changeset_propose, changeset_reject
from tracker.trust.permissions import CHANGESET_APPLY, TRACKER_READ, TRACKER_WRITE
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
    ChangesetApplySerializer,
    ChangesetFilterSerializer,
    ChangesetImpactSerializer,
    ChangesetProposeSerializer,
    ChangesetRejectSerializer,
    ChangesetSerializer,
)

DECISION_ERRORS = (*WRITE_ERRORS, 409)


class ChangesetListApi(BalletApi):
    @extend_schema(
        summary="List a project's changesets, newest first",
        parameters=[ChangesetFilterSerializer],
        responses=with_errors({200: ChangesetSerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        filters = parse(ChangesetFilterSerializer, request.query_params)
        return self.paginated(
            changeset_list(project=project, status=filters.get("status")), ChangesetSerializer
        )

    @extend_schema(
        summary="Propose a changeset",
        description="Needs tracker.write. Operations are validated against the current plan.",
        request=ChangesetProposeSerializer,
        responses=with_errors({201: ChangesetSerializer}, *WRITE_ERRORS),
    )
    def post(self, request: Request, key: str) -> Response:
        project = project_for(request, key, TRACKER_WRITE)
        data = parse(ChangesetProposeSerializer, request.data)
        changeset = changeset_propose(actor=actor_for(request), project=project, **data)
        return Response(ChangesetSerializer(changeset).data, status=status.HTTP_201_CREATED)


class ChangesetDetailApi(BalletApi):
    @extend_schema(
        summary="Read a changeset", responses=with_errors({200: ChangesetSerializer}, *READ_ERRORS)
    )
    def get(self, request: Request, key: str, number: int) -> Response:
        project = project_for(request, key, TRACKER_READ)
        return Response(ChangesetSerializer(changeset_get(project=project, number=number)).data)


class ChangesetImpactApi(BalletApi):
    @extend_schema(
        summary="What applying a proposed changeset would change in what can run",
        description=(
            "Needs tracker.read. The operations are tried against the current plan and rolled back: "
            "the tickets that would become or stop being runnable, become blocked or unblocked, the "
            "longest remaining chain of blockers and the dependency graph, before and after. A ticket "
            "the changeset creates is named by its $ref and marked new. 409 with the reason when the "
            "changeset is decided or no longer applies to the plan."
        ),
        responses=with_errors({200: ChangesetImpactSerializer}, *READ_ERRORS, 409),
    )
    def get(self, request: Request, key: str, number: int) -> Response:
        project = project_for(request, key, TRACKER_READ)
        changeset = changeset_get(project=project, number=number)
        impact = changeset_impact(changeset=changeset)
        if impact.unavailable:
            raise ConflictError(impact.unavailable, current={"number": number, "status": changeset.status})
        return Response(ChangesetImpactSerializer({"changeset": changeset, "impact": impact}).data)


class ChangesetApplyApi(BalletApi):
    @extend_schema(
        summary="Apply a proposed changeset, all or nothing",
        description=(
            "Needs changeset.apply. If the plan moved on (a stale base_version, say) the changeset "
            "becomes conflicted and the answer is 409 with the changeset in error.current."
        ),
        request=ChangesetApplySerializer,
        responses=with_errors({200: ChangesetSerializer}, *DECISION_ERRORS),
    )
    def post(self, request: Request, key: str, number: int) -> Response:
        project = project_for(request, key, CHANGESET_APPLY)
        data = parse(ChangesetApplySerializer, request.data)
        changeset = changeset_apply(
            actor=actor_for(request), changeset=changeset_get(project=project, number=number), **data
        )
        data = ChangesetSerializer(changeset).data
        if changeset.status == ChangesetStatus.CONFLICTED:
            raise ConflictError(changeset.conflict_reason, current=data)
        return Response(data)


class ChangesetRejectApi(BalletApi):
    @extend_schema(
        summary="Reject a proposed changeset with a note",
        description="Needs changeset.apply.",
        request=ChangesetRejectSerializer,
        responses=with_errors({200: ChangesetSerializer}, *DECISION_ERRORS),
    )
    def post(self, request: Request, key: str, number: int) -> Response:
        project = project_for(request, key, CHANGESET_APPLY)
        data = parse(ChangesetRejectSerializer, request.data)
        changeset = changeset_reject(
            actor=actor_for(request), changeset=changeset_get(project=project, number=number), **data
        )
        return Response(ChangesetSerializer(changeset).data)
