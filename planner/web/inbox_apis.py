"""The inbox over REST: ``GET /api/v1/inbox/`` and ``POST /api/v1/inbox/{id}/dismiss/``.

Both need only the ``read`` scope of an API key: the list reads, and a dismissal changes nothing
but what the caller's own inbox shows (no plan, no other user). ``?count_only=1`` answers the count
alone, in one statement after the caller's access: what every page's header polls.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from planner.domain.inbox import MAX_ENTRIES, inbox_count, inbox_entries
from planner.domain.services.inbox import inbox_dismiss
from tracker.models import Scope
from tracker.web.apis.base import READ_ERRORS, BalletApi, caller, parse, with_errors


class InboxFilterSerializer(serializers.Serializer[Any]):
    count_only = serializers.ChoiceField(
        choices=["true", "false", "1", "0"],
        required=False,
        allow_blank=True,
        help_text="true (or 1): only the count (results is empty); false, 0 or blank: the entries too.",
    )


class InboxEntrySerializer(serializers.Serializer[Any]):
    id = serializers.CharField(help_text="Stable: what dismissing names (changeset-DEMO-12, notice-7).")
    kind = serializers.CharField(
        help_text="question, request, approval, changeset, review, claim_expired, invitation, "
        "or a notice's kind (mention, comment, key_revoked, …)."
    )
    project = serializers.CharField(allow_null=True, help_text="The project's key; null for none.")
    title = serializers.CharField(help_text="Plain text.")
    url = serializers.CharField(help_text="The page to open, a path on this server.")
    created_at = serializers.DateTimeField()


class InboxSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField(help_text="Every entry waiting, even beyond those listed.")
    results = InboxEntrySerializer(many=True)


class InboxApi(BalletApi):
    scopes = {"GET": Scope.READ}

    @extend_schema(
        summary="What waits for you, across your projects, newest first",
        description="Questions left to the humans, the planner's requests and approvals, changesets "
        "you may decide, tickets in review, mentions, your expired claims, invitations and notices; "
        f"those you dismissed left out. At most {MAX_ENTRIES} are listed; count counts them all.",
        parameters=[InboxFilterSerializer],
        responses=with_errors({200: InboxSerializer}, *READ_ERRORS),
    )
    def get(self, request: Request) -> Response:
        filters = parse(InboxFilterSerializer, request.query_params)
        user = caller(request)
        if filters.get("count_only") in ("true", "1"):
            body: dict[str, Any] = {"count": inbox_count(user=user), "results": []}
        else:
            entries = inbox_entries(user=user)
            count = len(entries) if len(entries) < MAX_ENTRIES else inbox_count(user=user)
            body = {"count": count, "results": entries}
        return Response(InboxSerializer(body).data, headers={"Cache-Control": "private, no-store"})


class InboxDismissApi(BalletApi):
    scopes = {"POST": Scope.READ}  # it changes only what the caller's own inbox shows

    @extend_schema(
        summary="Dismiss an entry of your inbox",
        description="It is not listed again. Dismissing twice is a 204 again; an id that names no "
        "entry of yours is a 404.",
        request=None,
        responses=with_errors({204: None}, 400, 401, 403, 404),
    )
    def post(self, request: Request, entry: str) -> Response:
        inbox_dismiss(user=caller(request), entry_id=entry)
        return Response(status=status.HTTP_204_NO_CONTENT)
