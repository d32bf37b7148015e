"""Agents' questions over REST (``docs/domain.md``, Agents' questions): ask, list, read (waiting
for the answer), withdraw.

Every request counts against the per-user limit of MCP and question requests
(``docs/trust.md``, Limits). Asking, reading and withdrawing are async views
(``planner/async_api.py``): they await the runner, and ``GET …/questions/{id}/?wait=SECONDS``
waits for the answer on the event loop (``agent_questions.question_await``), holding no thread
and no database connection meanwhile.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from planner.async_api import AsyncBalletApi
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
        rows = question_list(
            user=caller(request), project=project, status=filters.get("status"), asker=filters.get("asker")
        )
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
        project, data = await db(_asking)(request, key)
        asked = await runner.ask(
            user=caller(request),
            project=project,
            text=data["text"],
            item_key=data.get("item"),
            idempotency_key=data.get("idempotency_key") or request.headers.get("Idempotency-Key"),
            fresh=data.get("fresh", False),
        )
        code = status.HTTP_200_OK if asked.replayed else status.HTTP_201_CREATED
        return await db(_serialized)(asked.question, code)


def _asking(request: Request, key: str) -> tuple[Project, dict[str, Any]]:
    project = project_for(request, key, PLANNER_CHAT)
    agent_request_count(user_id=caller(request).pk, write=True)
    return project, parse(QuestionAskSerializer, request.data)


def _serialized(question: Question, code: int = status.HTTP_200_OK) -> Response:
    """Serialized where the database may be read: a serializer is free to follow a relation."""
    return Response(QuestionSerializer(question).data, status=code)


class QuestionDetailApi(AsyncBalletApi):
    @extend_schema(
        summary="A question and its answer; ?wait=SECONDS (up to 60) waits for the answer",
        parameters=[QuestionWaitSerializer],
        responses=with_errors({200: QuestionSerializer}, *READ_ERRORS, 429),
    )
    async def get(self, request: Request, key: str, question: str) -> Response:
        user = caller(request)
        project, found, seconds = await db(_reading)(request, key, question)
        if seconds > 0 and found.status == QuestionStatus.OPEN:
            if not found.started:  # the running-turn limits kept it waiting: a turn may have freed up
                await runner.start_waiting(force=True)
            found = await question_await(user=user, project=project, question_id=found.pk, seconds=seconds)
        return await db(_serialized)(found)


def _reading(request: Request, key: str, question: str) -> tuple[Project, Question, float]:
    """The project, the question as it is now, and how long the caller would wait for its answer."""
    project = project_for(request, key, TRACKER_READ)
    agent_request_count(user_id=caller(request).pk, write=False)
    seconds = parse(QuestionWaitSerializer, request.query_params)["wait"]
    return project, question_get(user=caller(request), project=project, question_id=question), seconds


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


class QuestionWithdrawApi(AsyncBalletApi):
    scopes = {"POST": Scope.ASK}

    @extend_schema(
        summary="Withdraw an unanswered question (its asker, or a project admin); its sub-chat stops",
        request=None,
        responses=with_errors({200: QuestionSerializer}, *WRITE_ERRORS, 409, 429, 503),
    )
    async def post(self, request: Request, key: str, question: str) -> Response:
        project = await db(_withdrawing)(request, key)
        withdrawn = await runner.withdraw(user=caller(request), project=project, question_id=question)
        return await db(_serialized)(withdrawn)


def _withdrawing(request: Request, key: str) -> Project:
    project = project_for(request, key, TRACKER_READ)
    agent_request_count(user_id=caller(request).pk, write=True)
    return project


__all__ = [
    "QuestionAnswerApi",
    "QuestionDetailApi",
    "QuestionListApi",
    "QuestionWithdrawApi",
]
