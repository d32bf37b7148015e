"""REST representations of webhooks and their deliveries (docs/events.md#webhooks), and the input
that makes or changes one. The secret is in the answer to a create only."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from tracker.models import DeliveryStatus, WebhookFormat
from tracker.services.events import EVENT_TYPES
from tracker.services.webhook_endpoints import MAX_NAME, MAX_URL
from tracker.web.serializers import StrictCharField, StrictSerializer

TYPES_HELP = "Event types to receive (docs/events.md#the-catalogue); none: every type."


class StrictBooleanField(serializers.BooleanField):
    """true or false, never "yes", 1 or "false"."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class WebhookSerializer(serializers.Serializer[Any]):
    """A webhook as its project's owners see it: never its secret."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    url = serializers.CharField()
    types = serializers.ListField(child=serializers.ChoiceField(choices=EVENT_TYPES), help_text=TYPES_HELP)
    format = serializers.ChoiceField(choices=WebhookFormat.choices)
    enabled = serializers.BooleanField()
    disabled_reason = serializers.CharField(help_text="Why it was disabled, by whom or after what failures.")
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    failing_since = serializers.DateTimeField(allow_null=True, help_text="Every attempt since failed.")
    failures_in_row = serializers.IntegerField(help_text="Failed attempts in a row; 20 disable it.")


class WebhookCreatedSerializer(WebhookSerializer):
    secret = serializers.CharField(
        help_text="whsec_…: verify each delivery's webhook-signature with it. Shown here only, once."
    )


class WebhookCreateSerializer(StrictSerializer):
    name = StrictCharField(max_length=MAX_NAME)
    url = StrictCharField(max_length=MAX_URL, help_text="http(s); private addresses are refused.")
    types = serializers.ListField(
        child=serializers.ChoiceField(choices=EVENT_TYPES),
        required=False,
        max_length=len(EVENT_TYPES),
        help_text=TYPES_HELP,
    )
    format = serializers.ChoiceField(
        choices=WebhookFormat.choices, required=False, help_text="standard (signed JSON) or slack."
    )


class WebhookUpdateSerializer(StrictSerializer):
    name = StrictCharField(max_length=MAX_NAME, required=False)
    url = StrictCharField(max_length=MAX_URL, required=False)
    types = serializers.ListField(
        child=serializers.ChoiceField(choices=EVENT_TYPES),
        required=False,
        max_length=len(EVENT_TYPES),
        help_text=TYPES_HELP,
    )
    format = serializers.ChoiceField(choices=WebhookFormat.choices, required=False)
    enabled = StrictBooleanField(
        required=False, help_text="false: disable it (pending deliveries fail); true: start afresh."
    )


class AttemptSerializer(serializers.Serializer[Any]):
    at = serializers.DateTimeField()
    status_code = serializers.IntegerField(allow_null=True, help_text="None: no answer.")
    duration_ms = serializers.IntegerField()
    response = serializers.CharField(help_text="The first KB of the answer.")
    error = serializers.CharField(help_text="What went wrong; empty when the receiver answered 2xx.")


class DeliverySerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    msg_id = serializers.CharField(help_text="The webhook-id header: the same on every attempt.")
    type = serializers.CharField()
    event = serializers.IntegerField(source="event_id", allow_null=True, help_text="None: a ping.")
    status = serializers.ChoiceField(choices=DeliveryStatus.choices)
    next_attempt_at = serializers.DateTimeField(help_text="When a pending delivery goes out next.")
    created_at = serializers.DateTimeField()
    delivered_at = serializers.DateTimeField(allow_null=True)
    attempts = AttemptSerializer(source="attempt_log", many=True, help_text="Every attempt, oldest first.")
