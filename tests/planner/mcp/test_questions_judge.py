"""The reuse judge (docs/domain.md#agents-questions): below the threshold, the answered questions of
the same item alike enough are shown to the project's model, whose verdict decides; the demo planner,
a used-up budget or a failed call leave the question asked as if nothing were remembered.

The tests' embeddings are the hashing stand-in: shared words make questions alike, so the rewording
below is 0.80 alike to the answered question (between the judge's floor, 0.45, and the threshold).
"""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from planner.agent.calls import GatewayError
from planner.domain.services.agent_questions import question_ask
from planner.domain.services.reuse_judge import JUDGE_SYSTEM, JudgeCall, Verdict, verdict_of
from planner.live.runner import runner
from planner.models import Question, QuestionStatus, Session, UsageRecord
from tests.fakes.messages_api import TextReply
from tests.fakes.scripted import Answer, call, say
from tests.planner.agent.test_gateway_sdk import fake_api  # noqa: F401 - the real SDK on the fake
from tests.planner.api_client import client_for
from tests.planner.conftest import sync
from tests.planner.live.test_budget import metered, set_settings
from tests.planner.mcp.conftest import connected, token_of

pytestmark = pytest.mark.django_db(transaction=True)

ANSWERED = "Which database does the login service use?"
REWORDED = "Which database does the login service run on?"  # the same, in other words
OTHER = "What port does the login service listen on?"  # alike, but another question


def output(result) -> dict:
    return json.loads(result.content[0].text)


def answered(project, asker, item, text: str = ANSWERED, answer: str = "PostgreSQL 17.") -> Question:
    return Question.objects.create(
        project=project,
        asker=asker,
        item=item,
        text=text,
        status=QuestionStatus.ANSWERED,
        answer=answer,
        answered_by="user:maintainer",
        human=User.objects.get(username="maintainer"),
        answered_at=timezone.now(),
        started=True,
    )


async def ask(member, item, text: str, **extra) -> dict:
    token = await sync(token_of)(member)
    async with connected(token) as session:
        asked = await session.call_tool(
            "ask_question", {"project": "BAL", "text": text, "item": item.key, "wait_seconds": 30, **extra}
        )
    assert not asked.is_error, asked
    return output(asked)


async def test_the_judge_names_the_question_that_asks_the_same_and_its_answer_comes_back(
    scripted, chat_project, member, owner, make_item
):
    item = await sync(make_item)(title="Move sessions", state="ready")
    other = await sync(answered)(chat_project, owner, item, text=OTHER, answer="Port 5433.")
    earlier = await sync(answered)(chat_project, owner, item)
    scripted.judgements.append(Answer("1"))  # the most alike first: the database question

    body = await ask(member, item, REWORDED)

    assert (body["status"], body["answer"], body["reused"], body["reused_from"]) == (
        "answered",
        "PostgreSQL 17.",
        True,
        earlier.pk,
    )
    assert scripted.requests == []  # no turn: the judge's call only
    assert await sync(Session.objects.count)() == 0
    [judged] = scripted.judge_requests
    assert judged.system == JUDGE_SYSTEM
    assert judged.model == "claude-haiku-4-5"  # the project's title model: a cheap one
    prompt = judged.messages[0].text
    assert prompt.index(ANSWERED) < prompt.index(OTHER)  # numbered most alike first
    assert REWORDED in prompt
    assert other.pk != earlier.pk
    records = await sync(
        lambda: list(UsageRecord.objects.values_list("purpose", "session_id", "project_id"))
    )()
    assert records == [("reuse_judge", None, chat_project.pk)]  # metered, against the project's budget


async def test_a_judge_that_names_none_leaves_the_question_asked(
    scripted, chat_project, member, owner, make_item
):
    item = await sync(make_item)(title="Move sessions", state="ready")
    await sync(answered)(chat_project, owner, item, text=OTHER, answer="Port 5433.")
    scripted.add(call("answer_question", {"answer": "PostgreSQL 17."}), say("Answered."))
    # "0" by default: none asks the same.

    body = await ask(member, item, REWORDED)
    await runner.wait(uuid.UUID(body["session"]))

    assert body["reused"] is False
    assert len(scripted.judge_requests) == 1
    question = await sync(Question.objects.get)(pk=body["id"])
    assert (question.status, question.answer) == (QuestionStatus.ANSWERED, "PostgreSQL 17.")


@pytest.mark.parametrize("failure", ["error", "budget"])
async def test_without_a_verdict_the_question_is_asked_as_if_nothing_were_remembered(
    failure, scripted, chat_project, member, owner, make_item
):
    item = await sync(make_item)(title="Move sessions", state="ready")
    await sync(answered)(chat_project, owner, item)
    if failure == "error":
        scripted.judgements.append(GatewayError("overloaded", "The API is overloaded."))
    else:
        await sync(set_settings)(chat_project, owner, daily_token_budget=1000)
        await sync(metered)(chat_project, input_tokens=900, output_tokens=100)
    scripted.add(call("answer_question", {"answer": "PostgreSQL 18 now."}), say("Answered."))

    body = await ask(member, item, REWORDED)

    assert body["reused"] is False
    assert body["session"] is not None  # its sub-chat: asked as if nothing were remembered
    assert len(scripted.judge_requests) == (1 if failure == "error" else 0)
    await runner.wait(uuid.UUID(body["session"]))


def test_the_demo_planner_has_no_judge_and_a_retry_asks_none(project, chat_project, member, owner, make_item):
    item = make_item(title="Move sessions", state="ready")
    answered(chat_project, owner, item)
    first = question_ask(user=member, project=chat_project, text=REWORDED, item_key=item.key)
    assert first.judge is not None  # Claude answers the project: the judge is asked first
    assert Question.objects.filter(text=REWORDED).count() == 0  # and nothing is recorded before it
    asked = question_ask(
        user=member,
        project=chat_project,
        text=REWORDED,
        item_key=item.key,
        idempotency_key="k1",
        verdict=Verdict(None),
    )
    again = question_ask(
        user=member, project=chat_project, text=REWORDED, item_key=item.key, idempotency_key="k1"
    )
    assert (again.replayed, again.judge, again.question_id) == (True, None, asked.question_id)

    chat_project.credential_encrypted = ""
    chat_project.save(update_fields=["credential_encrypted"])  # the demo planner answers now
    demo = question_ask(user=member, project=chat_project, text=REWORDED, item_key=item.key, fresh=False)
    assert demo.judge is None


def test_a_verdict_for_a_question_no_longer_a_candidate_reuses_nothing(
    chat_project, member, owner, make_item
):
    item = make_item(title="Move sessions", state="ready")
    earlier = answered(chat_project, owner, item)
    Question.objects.filter(pk=earlier.pk).update(one_off=True)  # marked one-off meanwhile
    asked = question_ask(
        user=member, project=chat_project, text=REWORDED, item_key=item.key, verdict=Verdict(earlier.pk)
    )
    question = Question.objects.get(pk=asked.question_id)
    assert (question.reused_from_id, question.status) == (None, QuestionStatus.OPEN)
    assert asked.start is not None


@pytest.mark.parametrize(
    ("reply", "chosen"),
    [("1", 11), ("2", 22), (" 2\n", 22), ("0", None), ("3", None), ("two", None), ("-1", None), ("", None)],
)
def test_only_a_number_among_the_candidates_names_one(reply, chosen):
    assert verdict_of(reply, JudgeCall(1, "…", (11, 22))) == Verdict(chosen)


async def test_over_rest_with_the_real_sdk_the_judges_number_reuses_the_answer(
    fake_api,  # noqa: F811 - the fixture imported above
    chat_project,
    member,
    owner,
    make_item,
):
    item = await sync(make_item)(title="Move sessions", state="ready")
    earlier = await sync(answered)(chat_project, owner, item)
    fake_api.enqueue_judgement(TextReply("1"))
    client = await client_for(member)

    response = await client.post("/api/v1/projects/BAL/questions/", {"text": REWORDED, "item": item.key})

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["status"], body["reused_from"], body["answer"]) == ("answered", earlier.pk, "PostgreSQL 17.")
    [judged] = fake_api.judge_requests
    assert judged.json is not None
    assert judged.json["system"][0]["text"] == JUDGE_SYSTEM
    assert fake_api.requests == []
