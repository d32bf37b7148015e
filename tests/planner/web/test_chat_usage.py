"""What the chat shows beside the conversation (docs/protocol.md): context use against ``compact_at_tokens``,
the chat's cost and the project's tokens today against its budget — ``planner/sessions/{id}/usage/``
and the transcript's ``usage``, both computed from the usage records."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from planner.domain.services.sessions import session_create
from planner.models import Message
from tests.planner.metering import metered, midnight
from tracker.services.activity import Actor
from tracker.services.projects import project_update

pytestmark = pytest.mark.django_db


def usage_of(client, session) -> dict:
    response = client.get(f"/api/v1/planner/sessions/{session.pk}/usage/")
    assert response.status_code == 200, response.content
    return response.json()


def say(session, seq: int, text: str) -> None:
    Message.objects.create(
        session=session, seq=seq, role="user", kind="human", content=[{"type": "text", "text": text}], turn=1
    )


@pytest.fixture
def chat(project, member):
    return session_create(user=member, project=project)


def test_the_context_is_the_last_reported_usage_plus_what_came_since(client_for, chat, member):
    say(chat, 1, "x" * 400)
    say(chat, 2, "y" * 800)  # after the last answer the provider reported on: 800 chars, 200 tokens
    chat.context_tokens, chat.context_tokens_seq = 5_000, 1
    chat.save()

    usage = usage_of(client_for(member), chat)

    assert (usage["context_tokens"], usage["compact_at_tokens"]) == (5_200, 100_000)
    assert usage["context_fraction"] == pytest.approx(0.052)


def test_a_chat_without_reported_usage_counts_its_prompt_and_messages(
    client_for, chat, member, owner, project
):
    project_update(actor=Actor(user=owner), project=project, settings={"compact_at_tokens": 2_000})
    empty = usage_of(client_for(member), chat)["context_tokens"]
    say(chat, 1, "z" * 4_000)

    usage = usage_of(client_for(member), chat)

    assert empty > 0  # the system prompt and the tool definitions are sent too
    assert usage["context_tokens"] == empty + 1_000
    assert usage["compact_at_tokens"] == 2_000


def test_spend_adds_up_the_usage_records(client_for, chat, member, project, other_project):
    other_chat = session_create(user=member, project=project)
    metered(project, tokens=(1_000, 200), session=chat)
    metered(project, tokens=(3_000, 400, 100, 2_000), session=chat, purpose="title")
    metered(project, tokens=(500, 50), session=other_chat)
    metered(project, tokens=(9_999, 9_999), session=chat, at=midnight() - timedelta(hours=1))  # yesterday
    metered(other_project, tokens=(7_777, 7_777))
    metered(project, tokens=(10, 10), model="a-model-without-a-price")

    usage = usage_of(client_for(member), chat)

    today = usage["today"]
    assert today["tokens"] == 1_000 + 200 + 3_000 + 400 + 100 + 2_000 + 500 + 50 + 10 + 10
    assert today["unpriced"] is True
    # claude-sonnet-5-5: 3 / 15 / 3.75 / 0.30 USD per million input / output / cache write / cache read
    priced_today = (
        (1_000 + 3_000 + 500) * 3 + (200 + 400 + 50) * 15 + 100 * Decimal("3.75") + 2_000 * Decimal("0.3")
    )
    assert Decimal(str(today["estimated_cost"])) == pytest.approx(priced_today / 1_000_000)
    mine = usage["session"]
    assert (mine["input_tokens"], mine["output_tokens"]) == (1_000 + 3_000 + 9_999, 200 + 400 + 9_999)
    assert mine["unpriced"] is False
    assert today["budget"] is None


def test_today_is_against_the_daily_budget(client_for, chat, member, owner, project):
    project_update(actor=Actor(user=owner), project=project, settings={"daily_token_budget": 10_000})
    metered(project, tokens=(2_000, 500), session=chat)

    today = usage_of(client_for(member), chat)["today"]

    assert (today["tokens"], today["budget"], today["fraction_used"]) == (2_500, 10_000, 0.25)


@pytest.mark.django_db(transaction=True)  # the transcript is read on the runner's database threads
def test_the_transcript_carries_the_same_figures(client_for, chat, member, project):
    metered(project, tokens=(1_000, 200), session=chat)

    body = client_for(member).get(f"/api/v1/planner/sessions/{chat.pk}").json()

    assert body["usage"] == usage_of(client_for(member), chat)


@pytest.mark.parametrize("who", ["viewer", "maintainer", "stranger", "anonymous"])
def test_only_those_who_read_the_chat_read_its_usage(client_for, chat, users, who):
    user = users.get(who)
    response = client_for(user).get(f"/api/v1/planner/sessions/{chat.pk}/usage/")
    assert response.status_code in ((401, 403) if who == "anonymous" else (404,)), response.content


def test_tokens_count_the_cached_apart_and_add_up(client_for, chat, member, project):
    metered(project, tokens=(2_000, 600, 800, 9_000), session=chat)  # 9,800 cached of 12,400
    metered(project, tokens=(100, 50))

    usage = usage_of(client_for(member), chat)

    mine, today = usage["session"], usage["today"]
    assert (mine["tokens"], mine["cached_tokens"]) == (12_400, 9_800)
    parts = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    assert mine["tokens"] == sum(mine[name] for name in parts)
    assert mine["cached_tokens"] == mine["cache_creation_input_tokens"] + mine["cache_read_input_tokens"]
    assert (today["tokens"], today["cached_tokens"]) == (12_550, 9_800)
    assert today["tokens"] == sum(today[name] for name in parts)
