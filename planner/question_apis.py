"""Agents' questions over REST (SPEC § 5, § 13.1): ask, list, read (waiting for the answer), withdraw.

Every request counts against the per-token limit of MCP and question requests
(SPEC § 12.4). ``GET …/questions/{id}/?wait=SECONDS`` is served by an async
view: the DRF view authenticates, authorizes and reads the question as usual;
when it is still open and the caller asked to wait, the async view waits for
the answer on the event loop (``questions.question_await``), holding no
thread and no database connection meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, JsonResponse
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder

from planner.live.bridge import db
from planner.live.runner import runner
from planner.models import Question, QuestionStatus
from planner.serializers import (
    QuestionAnswerSerializer,
    QuestionAskSerializer,
    QuestionFilterSerializer,
    QuestionSerializer,
    QuestionWaitSerializer,
)
from planner.services.agent_questions import (
    question_answer_human,
    question_await,
    question_get,
    question_list,
)
from tracker.apis.base import READ_ERRORS, WRITE_ERRORS, BalletApi, caller, parse, project_for, with_errors
from tracker.limits import agent_request_count
from tracker.models import Project, Scope
from tracker.permissions import PLANNER_CHAT, TRACKER_READ


class QuestionListApi(BalletApi):
    scopes = {"POST": Scope.ASK}

    @extend_schema(
        summary="The project's questions from agents, newest first",
        parameters=[QuestionFilterSerializer],
        responses=with_errors({200: QuestionSerializer(many=True)}, 400, *READ_ERRORS, 429),
    )
    def get(self, request: Request, key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        agent_request_count(user_id=caller(request).pk, write=False)
        filters = parse(QuestionFilterSerializer, request.query_params)
        rows = question_list(
            user=caller(request), project=project, status=filters.get("status"), asker=filters.get("asker")
        )
        return self.paginated(rows, QuestionSerializer)

    @extend_schema(
        summary="Ask the planner a question about the project or one item",
        description="Needs planner.chat. The question's sub-chat starts at once (or, past the running-turn "
        "limits, as soon as a turn frees up); read the answer with GET …/questions/{id}/?wait=30. With an "
        "idempotency key (the field, or an Idempotency-Key header), asking again with the same key returns "
        "the question first asked with it (200) instead of asking twice.",
        request=QuestionAskSerializer,
        responses=with_errors(
            {201: QuestionSerializer, 200: QuestionSerializer}, *WRITE_ERRORS, 409, 429, 503
        ),
    )
    def post(self, request: Request, key: str) -> Response:
        project = project_for(request, key, PLANNER_CHAT)
        agent_request_count(user_id=caller(request).pk, write=True)
        data = parse(QuestionAskSerializer, request.data)
        asked = async_to_sync(runner.ask)(
            user=caller(request),
            project=project,
            text=data["text"],
            item_key=data.get("item"),
            idempotency_key=data.get("idempotency_key") or request.headers.get("Idempotency-Key"),
        )
        code = status.HTTP_200_OK if asked.replayed else status.HTTP_201_CREATED
        return Response(QuestionSerializer(asked.question).data, status=code)


@dataclass(frozen=True)
class _Wait:
    user: User
    project: Project
    question_id: int
    seconds: float
    started: bool


class QuestionDetailApi(BalletApi):
    @extend_schema(
        summary="A question and its answer; ?wait=SECONDS (up to 60) waits for the answer",
        parameters=[QuestionWaitSerializer],
        responses=with_errors({200: QuestionSerializer}, 400, *READ_ERRORS, 429),
    )
    def get(self, request: Request, key: str, question: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        agent_request_count(user_id=caller(request).pk, write=False)
        seconds = parse(QuestionWaitSerializer, request.query_params)["wait"]
        found = question_get(user=caller(request), project=project, question_id=question)
        if seconds > 0 and found.status == QuestionStatus.OPEN:
            # question_detail waits for it on the event loop, then answers
            request._request.ballet_wait = _Wait(caller(request), project, found.pk, seconds, found.started)  # type: ignore[attr-defined]
        return Response(QuestionSerializer(found).data)


async def question_detail(request: HttpRequest, key: str, question: str) -> HttpResponse:
    """``QuestionDetailApi``, and the wait for an open question's answer, off every thread.

    In production mode the DRF view runs on the planner's database threads (``executor.py``),
    whose PostgreSQL connections are few and kept: a request's own thread would hold a connection
    of its own for as long as the request waits, and fifty waiting agents would use up the
    server's. An embedded SQLite connection costs nothing to hold: the request's thread serves."""
    run = db if settings.PRODUCTION_MODE else sync_to_async
    response: HttpResponse = await run(_detail)(request, key=key, question=question)
    wait: _Wait | None = getattr(request, "ballet_wait", None)
    if wait is None:
        return response
    if not wait.started:  # the running-turn limits kept it waiting: a turn may have freed up
        await runner.start_waiting(force=True)
    answered = await question_await(
        user=wait.user, project=wait.project, question_id=wait.question_id, seconds=wait.seconds
    )
    # Serialized where the database may be read: a serializer is free to follow a relation.
    return JsonResponse(await db(_serialized)(answered), encoder=JSONEncoder)


def _serialized(question: Question) -> dict[str, Any]:
    return dict(QuestionSerializer(question).data)


_detail = QuestionDetailApi.as_view()
# drf-spectacular documents the route by its DRF view.
question_detail.cls = QuestionDetailApi  # type: ignore[attr-defined]
question_detail.initkwargs = {}  # type: ignore[attr-defined]


class QuestionAnswerApi(BalletApi):
    scopes = {"POST": Scope.ASK}

    @extend_schema(
        summary="Answer a question that waits for the project's humans (needs_human)",
        description="Needs planner.chat. The answer is recorded under the caller's name and the asker's "
        "wait returns it. A question the planner is still on (open) is answered in its sub-chat.",
        request=QuestionAnswerSerializer,
        responses=with_errors({200: QuestionSerializer}, *WRITE_ERRORS, 409, 429),
    )
    def post(self, request: Request, key: str, question: str) -> Response:
        project = project_for(request, key, PLANNER_CHAT)
        data = parse(QuestionAnswerSerializer, request.data)
        answered = question_answer_human(
            user=caller(request), project=project, question_id=question, answer=data["answer"]
        )
        return Response(QuestionSerializer(answered).data)


class QuestionWithdrawApi(BalletApi):
    scopes = {"POST": Scope.ASK}

    @extend_schema(
        summary="Withdraw an unanswered question (its asker, or a project admin); its sub-chat stops",
        request=None,
        responses=with_errors({200: QuestionSerializer}, *WRITE_ERRORS, 409, 429, 503),
    )
    def post(self, request: Request, key: str, question: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        agent_request_count(user_id=caller(request).pk, write=True)
        withdrawn = async_to_sync(runner.withdraw)(
            user=caller(request), project=project, question_id=question
        )
        return Response(QuestionSerializer(withdrawn).data)


__all__ = [
    "QuestionAnswerApi",
    "QuestionDetailApi",
    "QuestionListApi",
    "QuestionWithdrawApi",
    "question_detail",
]
