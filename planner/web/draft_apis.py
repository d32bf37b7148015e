"""Knowledge drafts over REST (docs/domain.md#drafts): the owner lists a session's drafts and
publishes or discards each; every open tab of the chat follows through a ``knowledge_draft`` frame.

Only the session's owner sees its drafts: to anyone else (a member reading a question's
sub-chat, an admin) the list is a 404, as their session's other private parts are.
"""

from __future__ import annotations

import uuid

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from planner.domain.services.drafts import (
    draft_discard,
    draft_frame,
    draft_list,
    draft_publish,
    draft_row,
)
from planner.live.hub import hub
from planner.models import KnowledgeDraft
from planner.web.serializers import DraftPublishSerializer, DraftSerializer
from tracker.errors import NotFoundError
from tracker.models import Scope
from tracker.web.apis.base import READ_ERRORS, WRITE_ERRORS, BalletApi, caller, parse, with_errors


class DraftListApi(BalletApi):
    scopes = {"GET": Scope.PLAN}  # a planner session is the plan scope's, read or written

    @extend_schema(
        summary="The knowledge drafts a session's compactions left, oldest first",
        description="Only the session's owner sees them; to anyone else the session does not exist.",
        responses=with_errors({200: DraftSerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request, session: str) -> Response:
        drafts = draft_list(session_id=_id(session), user=caller(request))
        return Response(DraftSerializer(drafts, many=True).data)


def _id(session: str) -> uuid.UUID:
    try:
        return uuid.UUID(session)
    except ValueError as exc:
        raise NotFoundError("Session not found.") from exc


def _told(draft: KnowledgeDraft) -> Response:
    """The draft as it stands, told to every tab of its chat once committed."""
    frame = draft_frame(draft)
    transaction.on_commit(lambda: hub.publish_from_sync(draft.session_id, [frame]))
    return Response(DraftSerializer(draft_row(draft)).data)


class DraftPublishApi(BalletApi):
    @extend_schema(
        summary="Publish a knowledge draft as an ordinary entry",
        description="Only the session's owner, with knowledge.write in its project. The entry is linked "
        "to the project and the items the draft names that you can read, written as planner:SESSION "
        "acting for you; kind, title and body, if sent, replace the draft's. A draft published or "
        "discarded already is a 409 with it as it stands.",
        request=DraftPublishSerializer,
        responses=with_errors({200: DraftSerializer}, *WRITE_ERRORS, 409),
    )
    @transaction.atomic
    def post(self, request: Request, session: str, draft: int) -> Response:
        changes = parse(DraftPublishSerializer, request.data)
        user = caller(request)
        return _told(draft_publish(session_id=_id(session), draft_id=draft, user=user, changes=changes))


class DraftDiscardApi(BalletApi):
    @extend_schema(
        summary="Discard a knowledge draft",
        description="Only the session's owner. It stays listed, discarded, and never becomes knowledge.",
        request=None,
        responses=with_errors({200: DraftSerializer}, *WRITE_ERRORS, 409),
    )
    @transaction.atomic
    def post(self, request: Request, session: str, draft: int) -> Response:
        return _told(draft_discard(session_id=_id(session), draft_id=draft, user=caller(request)))
