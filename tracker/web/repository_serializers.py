"""REST representations of a project's linked repositories (SPEC § 16), and the input that links
or changes one. The credential goes in, never out: ``has_credential`` says whether there is one."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from tracker.services.repositories import MAX_BRANCH, MAX_CREDENTIAL, MAX_NAME, MAX_PATH, MAX_URL
from tracker.web.serializers import StrictCharField, StrictSerializer

CREDENTIAL_HELP = (
    "For an https URL: a token, or USERNAME:PASSWORD. Kept encrypted, never shown again; "
    "an empty string removes it."
)


class RepositorySerializer(serializers.Serializer[Any]):
    """A repository as the project's readers see it: never its credential."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    url = serializers.CharField(help_text="https:// or ssh://; empty for a local repository.")
    local_path = serializers.CharField(help_text="A folder under [repositories] local_roots; or empty.")
    default_branch = serializers.CharField()
    has_credential = serializers.BooleanField()
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    last_fetch_at = serializers.DateTimeField(allow_null=True, help_text="When the last fetch ended.")
    last_commit = serializers.CharField(help_text="The default branch's commit at the last good fetch.")
    size_bytes = serializers.IntegerField(help_text="The mirror's size at the last good fetch.")
    last_error = serializers.CharField(help_text="Why the last fetch failed; empty if it did not.")
    fetching = serializers.BooleanField(help_text="A fetch is on its way.")
    fetch_requested = serializers.SerializerMethodField(help_text="A fetch was asked for and waits.")

    def get_fetch_requested(self, repo: Any) -> bool:
        return repo.fetch_requested_at is not None


class RepositoryLinkSerializer(StrictSerializer):
    name = StrictCharField(max_length=MAX_NAME, help_text="Lowercase letters, digits, - and _.")
    url = StrictCharField(max_length=MAX_URL, required=False, help_text="https:// or ssh://, no credential.")
    local_path = StrictCharField(max_length=MAX_PATH, required=False)
    default_branch = StrictCharField(max_length=MAX_BRANCH, required=False)
    credential = StrictCharField(
        max_length=MAX_CREDENTIAL, required=False, trim_whitespace=False, help_text=CREDENTIAL_HELP
    )


class RepositoryUpdateSerializer(StrictSerializer):
    default_branch = StrictCharField(max_length=MAX_BRANCH, required=False)
    credential = StrictCharField(
        max_length=MAX_CREDENTIAL,
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text=CREDENTIAL_HELP,
    )
