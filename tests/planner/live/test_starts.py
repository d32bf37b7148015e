"""A few turns open at once in a process (planner/live/starts.py): a message that starts a turn
waits for a slot, and every road out of a start gives it back."""

from __future__ import annotations

import asyncio

import pytest

from planner.domain.services.sessions import session_create
from planner.live import starts, turn
from planner.live.runner import runner
from tests.fakes.scripted import Hang
from tests.planner.conftest import sync
from tracker.errors import RateLimitedError

pytestmark = pytest.mark.django_db(transaction=True)

NEVER = 3600.0  # no slot given back by its timer while a test runs


@pytest.fixture
def held_for_ever(monkeypatch):
    monkeypatch.setattr(starts, "HOLD_SECONDS", NEVER)


async def taken_count() -> int:
    """Slots taken now in this loop's gate: how many can be taken at once, less those free."""
    free = 0
    taken = []
    while True:
        try:
            taken.append(await asyncio.wait_for(starts.slot(), 0.05))
        except TimeoutError:
            break
        free += 1
    for one in taken:
        one.release()
    return starts.AT_ONCE - free


async def test_a_slot_waits_while_the_others_are_taken_and_goes_to_the_first_waiting(held_for_ever):
    first, second = await starts.slot(), await starts.slot()
    waiting = [asyncio.create_task(starts.slot()) for _ in range(2)]
    await asyncio.sleep(0.05)
    assert [task.done() for task in waiting] == [False, False]

    first.release()
    first.release()  # once only: a second release frees nothing more
    third = await asyncio.wait_for(waiting[0], 5)
    await asyncio.sleep(0.05)
    assert not waiting[1].done()

    second.release()
    fourth = await asyncio.wait_for(waiting[1], 5)
    third.release()
    fourth.release()


async def test_a_slot_held_too_long_is_given_back_by_its_timer(monkeypatch):
    monkeypatch.setattr(starts, "HOLD_SECONDS", 0.05)
    stuck = [await starts.slot() for _ in range(starts.AT_ONCE)]

    nxt = await asyncio.wait_for(starts.slot(), 5)

    assert stuck[0].released
    nxt.release()
    for one in stuck:
        one.release()


async def test_release_soon_gives_the_slot_back_once_the_caller_yields(held_for_ever):
    taken = await starts.slot()

    taken.release_soon()
    assert not taken.released  # what the caller does before it waits still counts
    await asyncio.sleep(0)
    assert taken.released


async def test_turns_open_past_the_limit_when_each_gives_its_slot_back_at_its_model_call(
    scripted, held_for_ever, limits, chat_project, member
):
    limits(running_turns_per_user=10)
    hangs = [Hang() for _ in range(starts.AT_ONCE + 2)]
    for hang in hangs:
        scripted.add(hang)
    sessions = [await sync(session_create)(user=member, project=chat_project) for _ in hangs]

    for session in sessions:  # each returns once its turn runs: none waits for another's model
        begin = await asyncio.wait_for(runner.send(session_id=session.pk, user=member, text="Go"), 10)
        assert begin.meaning == "started"
    await asyncio.wait_for(asyncio.gather(*(hang.started.wait() for hang in hangs)), 10)

    assert await taken_count() == 0
    for session in sessions:
        await runner.stop(session_id=session.pk, user=member)
        await runner.wait(session.pk)


async def test_a_refused_or_steering_message_gives_its_slot_back(
    scripted, held_for_ever, limits, session, member
):
    limits(messages_per_minute=starts.AT_ONCE + 2)  # the start and the steering, then refusals
    hang = Hang()
    scripted.add(hang)
    await runner.send(session_id=session.pk, user=member, text="Start")
    await asyncio.wait_for(hang.started.wait(), 10)
    for n in range(starts.AT_ONCE + 1):  # it steers the running turn: no turn of its own
        steered = await asyncio.wait_for(runner.send(session_id=session.pk, user=member, text=f"And {n}"), 10)
        assert steered.meaning == "steered"
    await runner.stop(session_id=session.pk, user=member)
    await runner.wait(session.pk)

    for _ in range(starts.AT_ONCE + 1):
        with pytest.raises(RateLimitedError):
            await asyncio.wait_for(runner.send(session_id=session.pk, user=member, text="Refused"), 10)

    assert await taken_count() == 0


async def test_a_turn_that_ends_before_calling_the_model_gives_its_slot_back(
    scripted, held_for_ever, session, member, monkeypatch
):
    async def crashed(*args: object) -> None:
        raise RuntimeError("the loop broke before its first model call")

    monkeypatch.setattr(turn, "_rounds", crashed)
    await runner.send(session_id=session.pk, user=member, text="Quick")
    await runner.wait(session.pk)

    assert await taken_count() == 0
    assert scripted.requests == []
