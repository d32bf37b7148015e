"""The daily token budget (docs/trust.md#limits): every token processed per project per UTC day, cached input
included, for turns, compaction and titles."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.utils import timezone

from planner.agent.calls import CallRecord
from planner.agent.messages import Usage
from planner.domain.services.sessions import session_create, usage_save
from planner.models import Event, Message, Session, UsageRecord
from tests.fakes.scripted import call, say
from tests.planner.conftest import drive, sync
from tracker.services.activity import Actor
from tracker.services.projects import project_update

pytestmark = pytest.mark.django_db(transaction=True)

USED_UP = "The project's daily token budget of 1,000 tokens is used up; it resets at 00:00 UTC."


def set_settings(project, owner, **values) -> None:
    project_update(actor=Actor(user=owner), project=project, settings=values)


def metered(
    project,
    *,
    input_tokens: int,
    output_tokens: int,
    days_ago: int = 0,
    cached: int = 0,
    purpose: str = "turn",
) -> None:
    """A model call the gateway metered for ``project``, ``days_ago`` days back; ``cached`` input
    tokens read from the prompt cache, as many written to it."""
    usage = Usage(
        input_tokens, output_tokens, cache_creation_input_tokens=cached, cache_read_input_tokens=cached
    )
    record = CallRecord(purpose, "claude-sonnet-5-5", usage, 1.0, "ok")
    usage_save(project_id=project.pk, session_id=None, record=record)
    if days_ago:
        row = UsageRecord.objects.filter(project=project).latest("pk")
        UsageRecord.objects.filter(pk=row.pk).update(created_at=timezone.now() - timedelta(days=days_ago))


async def turn_end(session) -> dict:
    event = await sync(lambda: Event.objects.filter(session=session, kind="turn_ended").latest("pk"))()
    return event.data


async def kinds_of(session) -> list[str]:
    return await sync(
        lambda: list(Message.objects.filter(session=session).order_by("seq").values_list("kind", flat=True))
    )()


async def test_a_used_up_budget_ends_the_turn_before_any_model_call(
    planner, model, session, member, owner, chat_project
):
    await sync(set_settings)(chat_project, owner, daily_token_budget=1000)
    await sync(metered)(chat_project, input_tokens=900, output_tokens=100)

    await drive(planner, session, member, "What is planned?")

    assert model.requests == []
    assert await turn_end(session) == {"reason": "failed", "error": USED_UP}
    assert (await kinds_of(session))[0] == "human"
    assert (await sync(Session.objects.get)(pk=session.pk)).state == "idle"


async def test_the_turn_ended_frame_carries_the_readable_reason(
    planner, model, session, member, owner, chat_project
):
    await sync(set_settings)(chat_project, owner, daily_token_budget=1000)
    await sync(metered)(chat_project, input_tokens=1000, output_tokens=0)
    watched = planner.watch(session_id=session.pk, user=member)
    assert (await anext(watched))["type"] == "state"  # watching before the turn can end
    await planner.send(session_id=session.pk, user=member, text="Hello")

    ended = None
    async with asyncio.timeout(10):
        async for frame in watched:
            if frame["type"] == "turn_ended":
                ended = frame
                break
    await watched.aclose()

    assert ended is not None
    assert (ended["reason"], ended["error"]) == ("failed", USED_UP)


async def test_a_turn_that_crosses_the_budget_stops_before_its_next_call(
    planner, model, session, member, owner, chat_project
):
    await sync(set_settings)(chat_project, owner, daily_token_budget=1000)
    await sync(metered)(chat_project, input_tokens=500, output_tokens=100)
    model.add(call("list_items", usage=Usage(input_tokens=350, output_tokens=50)))

    await drive(planner, session, member, "Look around")

    assert len(model.requests) == 1
    assert await turn_end(session) == {"reason": "failed", "error": USED_UP}
    # Nothing stored is lost and no tool_use waits for its result.
    assert (await kinds_of(session))[-2:] == ["assistant", "tool_results"]
    assert await sync(lambda: UsageRecord.objects.filter(project=chat_project).count())() == 2


async def test_below_the_budget_the_turn_runs(planner, model, session, member, owner, chat_project):
    await sync(set_settings)(chat_project, owner, daily_token_budget=1000)
    await sync(metered)(chat_project, input_tokens=800, output_tokens=100)
    model.add(say("Done."))

    await drive(planner, session, member, "Hello")

    assert await turn_end(session) == {"reason": "completed"}


async def test_this_turns_unsaved_usage_counts_too(planner, model, member, owner, chat_project):
    """Compaction's usage waits for the next step's transaction; the turn's next call still sees it."""
    await sync(set_settings)(chat_project, owner, daily_token_budget=2000, compact_at_tokens=1000)
    session = await sync(session_create)(user=member, project=chat_project)
    model.add(say("First answer.", usage=Usage(input_tokens=1200, output_tokens=10)))
    await drive(planner, session, member, "One")
    model.add(say("The summary.", usage=Usage(input_tokens=700, output_tokens=100)))

    await drive(planner, session, member, "Two")

    assert [r.purpose for r in model.requests] == ["turn", "compaction"]
    error = (await turn_end(session))["error"]
    assert error == "The project's daily token budget of 2,000 tokens is used up; it resets at 00:00 UTC."


async def test_yesterdays_usage_does_not_count(planner, model, session, member, owner, chat_project):
    await sync(set_settings)(chat_project, owner, daily_token_budget=1000)
    await sync(metered)(chat_project, input_tokens=5000, output_tokens=500, days_ago=1)
    model.add(say("Done."))

    await drive(planner, session, member, "Hello")

    assert await turn_end(session) == {"reason": "completed"}


async def test_without_a_budget_use_is_unlimited(planner, model, session, member, chat_project):
    await sync(metered)(chat_project, input_tokens=10_000_000, output_tokens=1_000_000)
    model.add(say("Done."))

    await drive(planner, session, member, "Hello")

    assert await turn_end(session) == {"reason": "completed"}


async def test_another_projects_usage_does_not_count(
    planner, model, session, member, owner, chat_project, other_project
):
    await sync(set_settings)(chat_project, owner, daily_token_budget=1000)
    await sync(metered)(other_project, input_tokens=5000, output_tokens=500)
    model.add(say("Done."))

    await drive(planner, session, member, "Hello")

    assert await turn_end(session) == {"reason": "completed"}


@pytest.mark.parametrize("purpose", ["turn", "compaction", "title"])
async def test_cached_input_counts_for_every_purpose(
    planner, model, session, member, owner, chat_project, purpose
):
    # 20 uncached tokens, but 1,000 the provider processed from and into its cache.
    await sync(set_settings)(chat_project, owner, daily_token_budget=1000)
    await sync(metered)(chat_project, input_tokens=10, output_tokens=10, cached=490, purpose=purpose)

    await drive(planner, session, member, "What is planned?")

    assert model.requests == []
    assert await turn_end(session) == {"reason": "failed", "error": USED_UP}


async def test_this_turns_cached_input_counts_before_its_next_call(
    planner, model, session, member, owner, chat_project
):
    await sync(set_settings)(chat_project, owner, daily_token_budget=1000)
    cached = Usage(
        input_tokens=5, output_tokens=5, cache_creation_input_tokens=500, cache_read_input_tokens=500
    )
    model.add(call("list_items", usage=cached))

    await drive(planner, session, member, "Look around")

    assert len(model.requests) == 1
    assert await turn_end(session) == {"reason": "failed", "error": USED_UP}
