"""Work over REST (docs/domain.md#work): claim a runnable ticket, heartbeat, report, release; read
claims and their reports. Agents use these with an API key of the ``work`` scope."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from tracker.models import ApiKey, Scope
from tracker.selectors import claim_get, claim_list, item_get, reports_of
from tracker.services.work import claim_release, claim_renew, claim_take, report_add
from tracker.trust.permissions import TRACKER_READ, TRACKER_WRITE
from tracker.web.apis.base import (
    READ_ERRORS,
    WRITE_ERRORS,
    BalletApi,
    actor_for,
    parse,
    project_for,
    with_errors,
)
from tracker.web.serializers import NoInputSerializer
from tracker.web.work_serializers import (
    ClaimDetailSerializer,
    ClaimFilterSerializer,
    ClaimReleaseSerializer,
    ClaimSerializer,
    ReportCreatedSerializer,
    ReportCreateSerializer,
    ReportSerializer,
    claim_read,
)

WORK_ERRORS = (*WRITE_ERRORS, 409)
CLAIM_ID = OpenApiParameter("claim_id", int, OpenApiParameter.PATH, description="The claim's id.")
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Your own key for this report, as the idempotency_key field.",
)


class ClaimTakeApi(BalletApi):
    scopes = {"POST": Scope.WORK}

    @extend_schema(
        summary="Claim a runnable ticket: it goes in_progress for the project's lease",
        description=(
            "Needs tracker.write. 409 if the ticket is not runnable (a ready ticket whose blockers "
            "are done or cancelled) or another worker holds it; the message says which. Claiming "
            "again a ticket you hold (a retry) returns your claim, its lease renewed: 200."
        ),
        request=NoInputSerializer,
        responses=with_errors({201: ClaimDetailSerializer, 200: ClaimDetailSerializer}, *WORK_ERRORS),
    )
    def post(self, request: Request, key: str, item_key: str) -> Response:
        project = project_for(request, key, TRACKER_WRITE)
        parse(NoInputSerializer, request.data)
        claim = claim_take(
            actor=actor_for(request), project=project, item=item_get(project=project, key=item_key)
        )
        made = status.HTTP_200_OK if claim.retaken else status.HTTP_201_CREATED
        return Response(claim_read(claim), status=made)


class ClaimListApi(BalletApi):
    @extend_schema(
        summary="List a project's claims, newest first",
        parameters=[ClaimFilterSerializer],
        responses=with_errors({200: ClaimSerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        filters = parse(ClaimFilterSerializer, request.query_params)
        active = {"true": True, "false": False}.get(filters.get("active", ""))
        return self.paginated(claim_list(project=project, active=active), ClaimSerializer)


class ClaimDetailApi(BalletApi):
    scopes = {"GET": Scope.READ, "POST": Scope.WORK}

    @extend_schema(
        summary="Read a claim with its reports",
        parameters=[CLAIM_ID],
        responses=with_errors({200: ClaimDetailSerializer}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str, claim_id: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        claim = claim_get(project=project, claim_id=claim_id)
        return Response(claim_read(claim))

    @extend_schema(
        summary="Heartbeat: the holder renews the claim's lease from now",
        description="Only the claim's holder. 409 if the claim has ended (or its lease ran out).",
        parameters=[CLAIM_ID],
        request=NoInputSerializer,
        responses=with_errors({200: ClaimDetailSerializer}, *WORK_ERRORS),
    )
    def post(self, request: Request, key: str, claim_id: str) -> Response:
        project = project_for(request, key, TRACKER_WRITE)
        parse(NoInputSerializer, request.data)
        claim = claim_renew(actor=actor_for(request), claim=claim_get(project=project, claim_id=claim_id))
        return Response(claim_read(claim))


class ClaimReportsApi(BalletApi):
    scopes = {"GET": Scope.READ, "POST": Scope.WORK}

    @extend_schema(
        summary="A claim's reports, oldest first",
        parameters=[CLAIM_ID],
        responses=with_errors({200: ReportSerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str, claim_id: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        claim = claim_get(project=project, claim_id=claim_id)
        return self.paginated(reports_of(claim=claim), ReportSerializer)

    @extend_schema(
        summary="Report on a claim: progress renews the lease; done, blocked and failed end it",
        description=(
            "Only the claim's holder. done sends the ticket to in_review (to done under the policy "
            '{"review": "none"}); blocked and failed put it back to ready. 409 if the claim has ended. '
            "With an idempotency_key (the field, or the Idempotency-Key header), reporting again "
            "returns the first report (200), even once the claim has ended; the same key with another "
            "report is a 409."
        ),
        parameters=[CLAIM_ID, IDEMPOTENCY_KEY],
        request=ReportCreateSerializer,
        responses=with_errors({201: ReportCreatedSerializer, 200: ReportCreatedSerializer}, *WORK_ERRORS),
    )
    def post(self, request: Request, key: str, claim_id: str) -> Response:
        project = project_for(request, key, TRACKER_WRITE)
        claim = claim_get(project=project, claim_id=claim_id)
        data = parse(ReportCreateSerializer, request.data)
        if "idempotency_key" not in data and request.headers.get("Idempotency-Key"):
            data["idempotency_key"] = request.headers["Idempotency-Key"]
        report = report_add(actor=actor_for(request), claim=claim, **data)
        made = status.HTTP_200_OK if report.replayed else status.HTTP_201_CREATED
        return Response(ReportCreatedSerializer(report).data, status=made)


class ClaimReleaseApi(BalletApi):
    scopes = {"POST": Scope.WORK}

    @extend_schema(
        summary="Release a claim: the ticket goes back to ready",
        description=(
            "The holder releases their own claim. Someone else needs tracker.write and must sign in "
            "(or use the legacy token): an API key releases only its own user's claims. 409 if the "
            "claim has ended."
        ),
        parameters=[CLAIM_ID],
        request=ClaimReleaseSerializer,
        responses=with_errors({200: ClaimDetailSerializer}, *WORK_ERRORS),
    )
    def post(self, request: Request, key: str, claim_id: str) -> Response:
        project = project_for(request, key, TRACKER_WRITE)
        claim = claim_get(project=project, claim_id=claim_id)
        data = parse(ClaimReleaseSerializer, request.data)
        released = claim_release(
            actor=actor_for(request),
            claim=claim,
            reason=data.get("reason", ""),
            by_key=isinstance(request.auth, ApiKey),
        )
        return Response(claim_read(released))
