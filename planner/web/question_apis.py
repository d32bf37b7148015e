"""Agents' questions over REST (``docs/domain.md``, Agents' questions): ask, list, read (waiting
for the answer), withdraw.

Every request counts against the per-user limit of MCP and question requests
(``docs/trust.md``, Limits). Asking, reading and withdrawing are async views
(``planner/web/async_api.py``): they await the runner, and ``GET …/questions/{id}/?wait=SECONDS``
waits for the answer on the event loop (``planner/live/question_waits.py``), holding no thread
and no database connection meanwhile. What they read and write runs on the database threads,
the request's project resolved there from its key each time (docs/architecture.md#one-bridge).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from planner.domain.services.agent_questions import (
    WaitingQuestion,
    Withdrawn,
    question_answer_human,
    question_ask,
    question_get,
    question_list,
    question_status,
    question_withdraw,
)
from planner.domain.services.answer_confirm import question_confirm
from planner.domain.services.reuse_judge import JudgeCall, Verdict
from planner.ground.bridge import db
from planner.live.question_waits import question_await
from planner.live.runner import runner
from planner.models import QuestionStatus
from planner.web.async_api import AsyncBalletApi
from planner.web.serializers import (
    QuestionAnswerSerializer,
    QuestionAskSerializer,
    QuestionFilterSerializer,
    QuestionSerializer,
    QuestionWaitSerializer,
)
from tracker.models import Scope
from tracker.trust.limits import agent_request_count
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


class QuestionListApi(AsyncBalletApi):
    scopes = {"POST": Scope.ASK}

    @extend_schema(
        summary="The project's questions from agents, newest first",
        parameters=[QuestionFilterSerializer],
        responses=with_errors({200: QuestionSerializer(many=True)}, *READ_ERRORS, 429),
    )
    async def get(self, request: Request, key: str) -> Response:
        return await db(self._list)(request, key)

    def _list(self, request: Request, key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        agent_request_count(user_id=caller(request).pk, write=False)
        filters = parse(QuestionFilterSerializer, request.query_params)
        user = caller(request)
        asker = user.get_username() if filters["mine"] else filters.get("asker")
        rows = question_list(user=user, project=project, status=filters.get("status"), asker=asker)
        return self.paginated(rows, QuestionSerializer)

    @extend_schema(
        summary="Ask the planner a question about the project or one item",
        description="Needs planner.chat. The question's sub-chat starts at once (or, past the running-turn "
        "limits, as soon as a turn frees up); read the answer with GET …/questions/{id}/?wait=30. With an "
        "idempotency key (the field, or an Idempotency-Key header), asking again with the same key returns "
        "the question first asked with it (200) instead of asking twice. Answers are remembered: when "
        "an answered question about the same item (or, without item, about the project) means the same, the "
        "question is answered at once with its answer (reused true, reused_from its id; no sub-chat); fresh "
        "true asks the planner anyway.",
        request=QuestionAskSerializer,
        responses=with_errors(
            {201: QuestionSerializer, 200: QuestionSerializer}, *WRITE_ERRORS, 409, 429, 503
        ),
    )
    async def post(self, request: Request, key: str) -> Response:
        posted = await runner.ask(functools.partial(_asking, request, key))
        code = status.HTTP_200_OK if posted.replayed else status.HTTP_201_CREATED
        return Response(posted.body, status=code)


@dataclass(frozen=True)
class _Posted:
    """A question asked, and serialized as it was recorded (before its sub-chat starts)."""

    replayed: bool
    start: WaitingQuestion | None
    body: dict[str, Any]
    judge: JudgeCall | None = None  # nothing recorded yet: the runner asks the judge, then again


def _asking(request: Request, key: str, verdict: Verdict | None = None) -> _Posted:
    project = project_for(request, key, PLANNER_CHAT)
    if verdict is None:  # the ask's first call; the second, with the judge's verdict, is the same request
        agent_request_count(user_id=caller(request).pk, write=True)
    data = parse(QuestionAskSerializer, request.data)
    asked = question_ask(
        user=caller(request),
        project=project,
        text=data["text"],
        item_key=data.get("item"),
        idempotency_key=data.get("idempotency_key") or request.headers.get("Idempotency-Key"),
        fresh=data.get("fresh", False),
        verdict=verdict,
    )
    if asked.judge is not None:
        return _Posted(False, None, {}, judge=asked.judge)
    found = question_get(user=caller(request), project=project, question_id=asked.question_id)
    return _Posted(asked.replayed, asked.start, dict(QuestionSerializer(found).data))


def _serialized(request: Request, key: str, question_id: int) -> Response:
    """The question as it is now, read where the database may be read (a serializer is free to
    follow a relation), by a reader who may still read it."""
    project = project_for(request, key, TRACKER_READ)
    found = question_get(user=caller(request), project=project, question_id=question_id)
    return Response(QuestionSerializer(found).data)


@dataclass(frozen=True)
class _Reading:
    """A question as a reader first reads it: what deciding whether to wait needs."""

    project_id: int
    question_id: int
    started: bool
    seconds: float
    body: dict[str, Any] | None  # serialized when the reader will not wait (else read after)


class QuestionDetailApi(AsyncBalletApi):
    @extend_schema(
        summary="A question and its answer; ?wait=SECONDS (up to 60) waits for the answer",
        parameters=[QuestionWaitSerializer],
        responses=with_errors({200: QuestionSerializer}, *READ_ERRORS, 429),
    )
    async def get(self, request: Request, key: str, question: str) -> Response:
        read = await db(_reading)(request, key, question)
        if read.body is not None:
            return Response(read.body)
        if not read.started:  # the running-turn limits kept it waiting: a turn may have freed up
            await runner.start_waiting(force=True)
        user = caller(request)
        settled = functools.partial(
            question_status, user=user, project_id=read.project_id, question_id=read.question_id
        )
        await question_await(question_id=read.question_id, status=settled, seconds=read.seconds)
        return await db(_serialized)(request, key, read.question_id)


def _reading(request: Request, key: str, question: str) -> _Reading:
    """The question as it is now, and how long the caller would wait for its answer."""
    project = project_for(request, key, TRACKER_READ)
    agent_request_count(user_id=caller(request).pk, write=False)
    seconds = parse(QuestionWaitSerializer, request.query_params)["wait"]
    found = question_get(user=caller(request), project=project, question_id=question)
    waits = seconds > 0 and found.status == QuestionStatus.OPEN
    body = None if waits else dict(QuestionSerializer(found).data)
    return _Reading(project.pk, found.pk, found.started, seconds, body)


class QuestionAnswerApi(BalletApi):
    scopes = {"POST": Scope.ASK}

    @extend_schema(
        summary="Answer a question that waits for the project's humans (needs_human)",
        description="Needs planner.chat. The answer is recorded under the caller's name and the asker's "
        "wait returns it; it is kept as a decision in the knowledge base (decision: its id) and given to "
        "later questions meaning the same, unless one_off is true. A question the planner is still on "
        "(open) is answered in its sub-chat.",
        request=QuestionAnswerSerializer,
        responses=with_errors({200: QuestionSerializer}, *WRITE_ERRORS, 409, 429),
    )
    def post(self, request: Request, key: str, question: str) -> Response:
        project = project_for(request, key, PLANNER_CHAT)
        data = parse(QuestionAnswerSerializer, request.data)
        answered = question_answer_human(
            user=caller(request),
            project=project,
            question_id=question,
            answer=data["answer"],
            one_off=data.get("one_off", False),
        )
        return Response(QuestionSerializer(answered).data)


class QuestionConfirmApi(BalletApi):
    scopes = {"POST": Scope.ASK}

    @extend_schema(
        summary="Confirm the planner's words of your reply as your answer (answered_via, not confirmed)",
        description="Only the human the answer names (answered_by) confirms it; it is then kept as their "
        "decision (decision: its id), their reply quoted as theirs and the planner's words as the planner's, "
        "and given to later questions meaning the same. Confirming again changes nothing.",
        request=None,
        responses=with_errors({200: QuestionSerializer}, *WRITE_ERRORS, 409, 429),
    )
    def post(self, request: Request, key: str, question: str) -> Response:
        project = project_for(request, key, PLANNER_CHAT)
        confirmed = question_confirm(user=caller(request), project=project, question_id=question)
        return Response(QuestionSerializer(confirmed).data)


class QuestionWithdrawApi(AsyncBalletApi):
    scopes = {"POST": Scope.ASK}

    @extend_schema(
        summary="Withdraw an unanswered question (its asker, or a project admin); its sub-chat stops",
        request=None,
        responses=with_errors({200: QuestionSerializer}, *WRITE_ERRORS, 409, 429, 503),
    )
    async def post(self, request: Request, key: str, question: str) -> Response:
        withdrawn = await runner.withdraw(functools.partial(_withdrawing, request, key, question))
        return await db(_serialized)(request, key, withdrawn.question_id)


def _withdrawing(request: Request, key: str, question: str) -> Withdrawn:
    project = project_for(request, key, TRACKER_READ)
    agent_request_count(user_id=caller(request).pk, write=True)
    return question_withdraw(user=caller(request), project=project, question_id=question)


__all__ = [
    "QuestionAnswerApi",
    "QuestionConfirmApi",
    "QuestionDetailApi",
    "QuestionListApi",
    "QuestionWithdrawApi",
]
