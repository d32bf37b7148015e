"""REST representations of work on the plan (docs/domain.md#work): claims and their reports, and
the input that reports and releases."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from tracker.models import Claim, ClaimStatus, Report, ReportKind
from tracker.selectors import claim_as_read, reports_of
from tracker.services.work import MAX_REASON as MAX_RELEASE_REASON
from tracker.web.serializers import StrictCharField, StrictSerializer


class ReportSerializer(serializers.Serializer[Report]):
    id = serializers.IntegerField()
    claim = serializers.IntegerField(source="claim_id")
    item = serializers.CharField(source="item.key")
    author = serializers.CharField(source="author.username")
    kind = serializers.ChoiceField(choices=ReportKind.choices)
    summary = serializers.CharField(help_text="Markdown, as the holder wrote it.")
    links = serializers.ListField(child=serializers.URLField())
    details = serializers.DictField()
    created_at = serializers.DateTimeField()


class ReportCreatedSerializer(ReportSerializer):
    claim_status = serializers.ChoiceField(
        source="claim.status", choices=ClaimStatus.choices, help_text="The claim's status after the report."
    )
    item_state = serializers.CharField(source="item.state", help_text="The ticket's state after the report.")


class ClaimSerializer(serializers.Serializer[Claim]):
    """A claim as it reads now: one whose lease ran out reads as expired, swept or not."""

    id = serializers.IntegerField()
    item = serializers.CharField(source="item.key")
    item_title = serializers.CharField(source="item.title")
    holder = serializers.CharField(source="holder.username")
    status = serializers.ChoiceField(choices=ClaimStatus.choices)
    created_at = serializers.DateTimeField()
    renewed_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(help_text="When the lease runs out without a heartbeat or report.")
    ended_at = serializers.DateTimeField(allow_null=True)
    end_reason = serializers.CharField()

    def to_representation(self, instance: Claim) -> dict[str, Any]:
        return dict(super().to_representation(claim_as_read(instance)))


class ClaimDetailSerializer(ClaimSerializer):
    reports = serializers.SerializerMethodField()

    @extend_schema_field(ReportSerializer(many=True))
    def get_reports(self, claim: Claim) -> list[dict[str, Any]]:
        return [dict(row) for row in ReportSerializer(self.context["reports"], many=True).data]


def claim_read(claim: Claim) -> dict[str, Any]:
    """A claim as every answer about one reads it, over REST and MCP: with its reports."""
    return dict(ClaimDetailSerializer(claim, context={"reports": reports_of(claim=claim)}).data)


class ClaimFilterSerializer(serializers.Serializer[Any]):
    active = serializers.ChoiceField(
        choices=["true", "false"],
        required=False,
        help_text="true: only claims whose lease holds; false: only ended ones (a lapsed lease has ended).",
    )


class ReportCreateSerializer(StrictSerializer):
    """Types only: the service checks the kind, blankness, sizes and URLs, for REST and MCP alike,
    and names every bad field at once."""

    kind = StrictCharField(help_text="progress, done, blocked or failed.")
    summary = StrictCharField(
        allow_blank=True, trim_whitespace=False, help_text="Markdown, at most 20,000 bytes."
    )
    links = serializers.ListField(
        child=StrictCharField(allow_blank=True, trim_whitespace=False),
        required=False,
        help_text="At most 20 absolute http(s) URLs.",
    )
    details = serializers.DictField(required=False, help_text="Any JSON object, at most 20,000 bytes.")
    idempotency_key = StrictCharField(
        required=False,
        help_text="Your own key for this report (or the Idempotency-Key header): reporting again with it "
        "(a retry after a lost answer) returns the first report, 200, even once the claim has ended.",
    )


class ClaimReleaseSerializer(StrictSerializer):
    reason = StrictCharField(
        max_length=MAX_RELEASE_REASON, required=False, allow_blank=True, trim_whitespace=False
    )
