"""REST shapes of the planner: sessions, the transcript, messages, usage."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from planner.models import Session
from planner.services import MAX_MESSAGE_CHARS, MAX_TITLE
from tracker.serializers import StrictCharField, StrictSerializer, no_nul_characters


class SessionSerializer(serializers.Serializer[Session]):
    id = serializers.UUIDField()
    project = serializers.CharField(source="project.key")
    user = serializers.CharField(source="user.username")
    parent = serializers.UUIDField(source="parent_id", allow_null=True)  # type: ignore[assignment]
    title = serializers.CharField()
    state = serializers.CharField()
    turn_count = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class SessionCreateSerializer(StrictSerializer):
    project = StrictCharField(max_length=10)
    title = StrictCharField(
        max_length=MAX_TITLE, required=False, allow_blank=True, default="", validators=[no_nul_characters]
    )
    parent = serializers.UUIDField(required=False, allow_null=True, default=None)  # type: ignore[assignment]


class SessionFilterSerializer(serializers.Serializer[Any]):
    project = serializers.CharField(required=False, allow_blank=True, max_length=10)


class TranscriptSerializer(SessionSerializer):
    summary = serializers.CharField()
    summary_up_to = serializers.IntegerField(allow_null=True)
    context_tokens = serializers.IntegerField()
    last_seen_seq = serializers.IntegerField()
    messages = serializers.ListField(child=serializers.DictField())
    tool_calls = serializers.ListField(child=serializers.DictField())
    events = serializers.ListField(child=serializers.DictField())


class MessageSendSerializer(StrictSerializer):
    text = StrictCharField(
        max_length=MAX_MESSAGE_CHARS, trim_whitespace=False, validators=[no_nul_characters]
    )


class MessageSentSerializer(serializers.Serializer[Any]):
    meaning = serializers.ChoiceField(choices=["started", "steered", "continued"])
    turn = serializers.IntegerField()
    seq = serializers.IntegerField(allow_null=True)


class StopSerializer(serializers.Serializer[Any]):
    stopped = serializers.BooleanField()


class UsageRowSerializer(serializers.Serializer[Any]):
    day = serializers.DateField()
    model = serializers.CharField()
    calls = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cache_creation_input_tokens = serializers.IntegerField()
    cache_read_input_tokens = serializers.IntegerField()


class TokensTodaySerializer(serializers.Serializer[Any]):
    date = serializers.DateField(help_text="The current UTC day.")
    tokens = serializers.IntegerField(help_text="Input + output tokens metered today.")
    budget = serializers.IntegerField(allow_null=True, help_text="daily_token_budget; null: none.")
    remaining = serializers.IntegerField(allow_null=True, help_text="Left today; null: no budget.")


class UsageSerializer(serializers.Serializer[Any]):
    results = UsageRowSerializer(many=True, help_text="Metered use by day and model, newest day first.")
    today = TokensTodaySerializer(help_text="Today's use against the daily token budget (resets 00:00 UTC).")


class UsageFilterSerializer(serializers.Serializer[Any]):
    days = serializers.IntegerField(required=False, min_value=1, max_value=3660, default=30)
