"""REST representations of API keys (docs/api-keys.md), and the input that makes one."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from tracker.models import ApiKey, Scope
from tracker.models.keys import KeyStatus
from tracker.services.keys import MAX_EXPIRY_DAYS
from tracker.services.keys import MAX_NAME as MAX_KEY_NAME
from tracker.web.serializers import StrictCharField, StrictIntegerField, StrictSerializer


class KeySerializer(serializers.Serializer[Any]):
    """An API key as its owner sees it: never its secret."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The start of the key (ballet_PREFIX.…), to tell keys apart.")
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=Scope.values))
    status = serializers.ChoiceField(choices=KeyStatus.choices)
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True, help_text="Updated at most once a minute.")
    revoked_at = serializers.DateTimeField(allow_null=True)
    projects = serializers.SerializerMethodField(help_text="Bound to these projects; none: unbound.")

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_projects(self, key: ApiKey) -> list[str]:
        return [project.key for project in key.projects.all()]


class KeyCreatedSerializer(KeySerializer):
    key = serializers.CharField(help_text="Send it as Authorization: Bearer KEY. Shown here only, once.")


class MemberKeySerializer(KeySerializer):
    user = serializers.CharField(source="user.username", help_text="The member whose key it is.")


class KeyCreateSerializer(StrictSerializer):
    name = StrictCharField(max_length=MAX_KEY_NAME)
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=Scope.values),
        min_length=1,
        max_length=len(Scope.values),
        help_text="read: the plan, knowledge, search, questions; ask: ask and withdraw questions; "
        "work: claims and reports; plan: propose changesets, write knowledge and skills, planner sessions.",
    )
    expires_in_days = StrictIntegerField(
        min_value=1, max_value=MAX_EXPIRY_DAYS, required=False, allow_null=True, help_text="None: never."
    )
    projects = serializers.ListField(
        child=StrictCharField(max_length=10),
        required=False,
        max_length=50,
        help_text="Keys of projects you can read: the key acts only there. None: wherever you may act.",
    )
