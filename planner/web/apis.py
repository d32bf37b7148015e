"""The planner over REST: open sessions, read transcripts, send messages, stop, and usage.

Messages mean what they mean on the WebSocket (the runner decides): the turn
runs in this server process while the request returns at once with 202. The
endpoints that call the runner are async (``planner/web/async_api.py``): they await
it on the event loop, and read and write the database through ``db``.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from planner.domain.selectors import session_get, session_list
from planner.domain.services.chats import human_title, session_archive, session_rename, session_unarchive
from planner.domain.services.drafts import drafts_of
from planner.domain.services.sessions import session_create
from planner.domain.services.sessions.resend import Redone
from planner.domain.services.spend import chat_usage, project_today, usage_rows_priced
from planner.domain.transcripts import session_about, transcript
from planner.ground.bridge import db
from planner.live.runner import runner
from planner.models import Session, SessionState
from planner.web.async_api import AsyncBalletApi
from planner.web.serializers import (
    AnsweredSerializer,
    AnswerSerializer,
    ChatUsageSerializer,
    DraftSerializer,
    MessageEditSerializer,
    MessageSendSerializer,
    MessageSentSerializer,
    RedoneSerializer,
    SessionChangeSerializer,
    SessionCreateSerializer,
    SessionFilterSerializer,
    SessionListedSerializer,
    SessionSerializer,
    StopSerializer,
    TranscriptSerializer,
    UsageFilterSerializer,
    UsageSerializer,
)
from tracker.errors import NotFoundError
from tracker.models import Scope
from tracker.trust.permissions import PLANNER_CHAT, TRACKER_READ
from tracker.web.apis.base import (
    READ_ERRORS,
    WRITE_ERRORS,
    BalletApi,
    caller,
    parse,
    project_for,
    with_errors,
)


class SessionListApi(BalletApi):
    scopes = {"GET": Scope.PLAN}  # a planner session is the plan scope's, read or written

    @extend_schema(
        summary="Your planner sessions, most recent first (archived: only the archived ones)",
        parameters=[SessionFilterSerializer],
        responses=with_errors({200: SessionListedSerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request) -> Response:
        filters = parse(SessionFilterSerializer, request.query_params)
        project = project_for(request, filters["project"], TRACKER_READ) if filters.get("project") else None
        parent = (
            session_get(user=caller(request), session_id=filters["parent"]) if filters.get("parent") else None
        )
        listed = session_list(
            user=caller(request),
            project=project,
            query=filters.get("q", ""),
            archived=filters["archived"],
            parent=parent,
        )
        return self.paginated(listed, SessionListedSerializer)

    @extend_schema(
        summary="Open a planner session (a sub-chat with a parent)",
        description="Needs planner.chat in the project.",
        request=SessionCreateSerializer,
        responses=with_errors({201: SessionSerializer}, *WRITE_ERRORS),
    )
    def post(self, request: Request) -> Response:
        data = parse(SessionCreateSerializer, request.data)
        project = project_for(request, data["project"], PLANNER_CHAT)
        parent = None
        if data.get("parent"):
            parent = session_get(user=caller(request), session_id=data["parent"])
        session = session_create(user=caller(request), project=project, title=data["title"], parent=parent)
        return Response(SessionSerializer(session).data, status=status.HTTP_201_CREATED)


class SessionDetailApi(AsyncBalletApi):
    scopes = {"GET": Scope.PLAN}  # a planner session is the plan scope's, read or written

    @extend_schema(
        summary="A session's complete transcript, tool calls, events, summary and state",
        responses=with_errors({200: TranscriptSerializer}, *READ_ERRORS),
    )
    async def get(self, request: Request, session: str) -> Response:
        state, session_id, body = await db(_transcript)(request, session)
        if state == SessionState.RUNNING and await runner.recover(session_id):
            _, _, body = await db(_transcript)(request, session)
        return Response(body)

    @extend_schema(
        summary="Rename your session, or archive or unarchive it",
        description="Only the session's owner (with planner.chat) may; to anyone else it does not exist. "
        "The title is stripped and must be 1 to 200 characters without control characters. The planner "
        "never replaces a title a human gave. archived false brings an archived session back (listed, "
        "and it takes messages again); true archives it as DELETE does.",
        request=SessionChangeSerializer,
        responses=with_errors({200: SessionSerializer}, *WRITE_ERRORS, 409),  # archiving a busy chat
    )
    async def patch(self, request: Request, session: str) -> Response:
        return await db(_rename)(request, session)

    @extend_schema(
        summary="Archive your session",
        description="Hidden from the session lists; the transcript stays readable by its URL (the audit "
        "trail) and the session takes no more messages (409). Archiving an archived session changes "
        "nothing (204 again). Refused (409) while a turn runs or a request waits for an answer. Only the "
        "session's owner (with planner.chat) may; to anyone else it does not exist.",
        request=None,
        responses=with_errors({204: None}, 401, 403, 404, 409),
    )
    async def delete(self, request: Request, session: str) -> Response:
        return await db(_archive)(request, session)


def _transcript(request: Request, session: str) -> tuple[str, uuid.UUID, dict[str, Any]]:
    """The session's state, its id and its transcript as the endpoint answers it."""
    user = caller(request)
    found = session_get(user=user, session_id=session)
    body = {**SessionSerializer(found).data, **transcript(session=found)}
    body.update(
        summary=found.summary,
        summary_up_to=found.summary_up_to,
        context_tokens=found.context_tokens,
        last_seen_seq=found.last_seen_seq,
        about=session_about(session=found),
        can_send=found.user_id == user.pk and found.archived_at is None,
        waiting=getattr(found, "waiting", False),  # annotated by session_list
        usage=ChatUsageSerializer(chat_usage(session=found)).data,
        drafts=DraftSerializer(drafts_of(session=found, user=user), many=True).data,
    )
    return found.state, found.pk, body


def _rename(request: Request, session: str) -> Response:
    found = _owned(request, session)
    data = parse(SessionChangeSerializer, request.data)
    user = caller(request)
    if "title" in data:
        human_title(data["title"])  # refused before anything changes
    if data.get("archived") is False:
        found = session_unarchive(session_id=found.pk, user=user)
    elif data.get("archived") is True:
        found = session_archive(session_id=found.pk, user=user)
    if "title" in data:
        found = session_rename(session_id=found.pk, user=user, title=data["title"])
    return Response(SessionSerializer(found).data)


def _archive(request: Request, session: str) -> Response:
    found = _owned(request, session)
    session_archive(session_id=found.pk, user=caller(request))
    return Response(status=status.HTTP_204_NO_CONTENT)


def _owned(request: Request, session: str) -> Session:
    """The caller's own session: whoever else may read it (a question's sub-chat) is told it
    does not exist before their input is looked at."""
    found = session_get(user=caller(request), session_id=session)
    if found.user_id != caller(request).pk:
        raise NotFoundError("Session not found.")
    return found


def _found_with(
    request: Request, session: str, serializer_class: type[serializers.Serializer[Any]]
) -> tuple[uuid.UUID, dict[str, Any]]:
    """The id of the session the caller may read, and the request's validated body."""
    found = session_get(user=caller(request), session_id=session)
    return found.pk, parse(serializer_class, request.data)


def _found(request: Request, session: str) -> uuid.UUID:
    """The id of the session the caller may read."""
    return session_get(user=caller(request), session_id=session).pk


class SessionMessageApi(AsyncBalletApi):
    @extend_schema(
        summary="Send a message: starts, steers or continues a turn",
        description="To an idle session it starts a turn; to a running one it steers the turn (delivered "
        "at the model's next call); to a paused one it continues the turn. Answers 202 at once; follow "
        "the turn on the WebSocket or by reading the transcript.",
        request=MessageSendSerializer,
        responses=with_errors({202: MessageSentSerializer}, *WRITE_ERRORS, 409, 429, 503),
    )
    async def post(self, request: Request, session: str) -> Response:
        found, data = await db(_found_with)(request, session, MessageSendSerializer)
        begin = await runner.send(session_id=found, user=caller(request), text=data["text"])
        body = {
            "meaning": begin.meaning,
            "turn": begin.turn,
            "seq": begin.message.seq if begin.message else None,
        }
        return Response(body, status=status.HTTP_202_ACCEPTED)


class SessionRetryApi(AsyncBalletApi):
    @extend_schema(
        summary="Retry the session's last turn, which failed or was stopped",
        description="Starts a new turn answering the history as it stands, without a new message: the "
        "unfinished answer the failed or stopped turn kept is superseded (kept in the transcript, no "
        "longer sent to the model). Only the owner, as for sending; refused (409 not_retryable) while a "
        "turn runs or waits, or when the last turn completed. Answers 202 at once.",
        request=None,
        responses=with_errors({202: RedoneSerializer}, *WRITE_ERRORS, 409, 429, 503),
    )
    async def post(self, request: Request, session: str) -> Response:
        found = await db(_found)(request, session)
        return _redone(await runner.retry(session_id=found, user=caller(request)))


class SessionEditApi(AsyncBalletApi):
    @extend_schema(
        summary="Edit your last message, which nothing answered, and send it again",
        description="seq names your last message; while the session is idle and no answer of the planner "
        "follows it (its turn failed or was stopped before the planner wrote), it is superseded (kept in "
        "the transcript, no longer sent to the model) and text starts a new turn. Refused (409 "
        "not_editable) while a turn runs or waits, when seq is not your last message, or once the "
        "planner answered it. Answers 202 at once.",
        request=MessageEditSerializer,
        responses=with_errors({202: RedoneSerializer}, *WRITE_ERRORS, 409, 429, 503),
    )
    async def post(self, request: Request, session: str) -> Response:
        found, data = await db(_found_with)(request, session, MessageEditSerializer)
        user = caller(request)
        return _redone(await runner.edit(session_id=found, user=user, seq=data["seq"], text=data["text"]))


def _redone(done: Redone) -> Response:
    message = done.begin.message
    body = {"turn": done.begin.turn, "seq": message.seq if message else None, "superseded": done.superseded}
    return Response(body, status=status.HTTP_202_ACCEPTED)


class SessionStopApi(AsyncBalletApi):
    @extend_schema(
        summary="Stop the session's running turn",
        request=None,
        responses=with_errors({200: StopSerializer}, *READ_ERRORS, 503),
    )
    async def post(self, request: Request, session: str) -> Response:
        found = await db(_found)(request, session)
        stopped = await runner.stop(session_id=found, user=caller(request))
        return Response({"stopped": stopped})


class SessionReplyApi(AsyncBalletApi):
    @extend_schema(
        summary="Answer a pending request: a question (text) or an approval (approve, reason)",
        description="The body of the WebSocket answer frame less its type. The owner answers any request; "
        "in a question's sub-chat every member with planner.chat may answer its questions. The turn resumes "
        "once no request is pending.",
        request=AnswerSerializer,
        responses=with_errors({200: AnsweredSerializer}, *WRITE_ERRORS, 409, 503),
    )
    async def post(self, request: Request, session: str) -> Response:
        found, data = await db(_found_with)(request, session, AnswerSerializer)
        resolution = await runner.reply(
            session_id=found,
            user=caller(request),
            request=data["request"],
            text=data.get("text"),
            approve=data.get("approve"),
            reason=data.get("reason"),
        )
        outcome = resolution.frames[0]
        assert outcome["type"] == "request_resolved"
        return Response(
            {
                "outcome": outcome["outcome"],
                "resumed": resolution.begin is not None,
                "waiting": resolution.waiting,
            }
        )


class SessionUsageApi(BalletApi):
    scopes = {"GET": Scope.PLAN}  # a planner session is the plan scope's, read or written

    @extend_schema(
        summary="A session's context use against compact_at_tokens, its spend, and the project's today",
        responses=with_errors({200: ChatUsageSerializer}, *READ_ERRORS),
    )
    def get(self, request: Request, session: str) -> Response:
        found = session_get(user=caller(request), session_id=session)
        return Response(ChatUsageSerializer(chat_usage(session=found)).data)


class ProjectUsageApi(BalletApi):
    @extend_schema(
        summary="Metered model use of a project, by day and model, and today's use against the budget",
        parameters=[UsageFilterSerializer],
        responses=with_errors({200: UsageSerializer}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        filters = parse(UsageFilterSerializer, request.query_params)
        since = (timezone.now() - timedelta(days=filters["days"] - 1)).date()
        rows = usage_rows_priced(project=project, since=since)
        return Response(UsageSerializer({"results": rows, "today": project_today(project=project)}).data)


__all__ = [
    "ProjectUsageApi",
    "SessionDetailApi",
    "SessionEditApi",
    "SessionListApi",
    "SessionMessageApi",
    "SessionReplyApi",
    "SessionRetryApi",
    "SessionStopApi",
    "SessionUsageApi",
]
