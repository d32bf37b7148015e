"""A process's stop is bounded: a task that will not end is left behind, and what follows it runs."""

from __future__ import annotations

import asyncio
import time

from planner.ground import ending
from planner.live.hub import Hub


async def _stubborn(started: asyncio.Event, released: asyncio.Event) -> None:
    """Swallows its cancellation until released, as a library waiting on a hung connection can."""
    started.set()
    while not released.is_set():
        try:
            await released.wait()
        except asyncio.CancelledError:
            continue


async def test_a_task_that_ends_is_waited_for() -> None:
    task = asyncio.ensure_future(asyncio.sleep(3600))
    assert await ending.cancelled([task], "a sleeper", within=5)
    assert task.cancelled()


async def test_a_task_that_will_not_end_is_left_behind_within_the_bound(caplog) -> None:
    started, released = asyncio.Event(), asyncio.Event()
    task = asyncio.ensure_future(_stubborn(started, released))
    await started.wait()
    began = time.monotonic()
    assert not await ending.cancelled([task], "a stubborn task", within=0.2)
    assert time.monotonic() - began < 2
    assert "1 of a stubborn task did not end within 0.2s" in caplog.text
    assert not task.done()
    released.set()
    await task


async def test_a_bounded_call_that_fails_is_reported_ended() -> None:
    async def failing() -> None:
        raise RuntimeError("boom")

    assert await ending.bounded(failing(), "a failing call", within=1)


async def test_the_hub_stops_even_when_its_relay_does_not(monkeypatch) -> None:
    """The hang of a test run: the relay's close never returned, the hub stayed on a dead
    loop, and every later test found "the hub already runs on an event loop"."""
    hub = Hub()
    await hub.start()
    started, released = asyncio.Event(), asyncio.Event()
    stubborn: list[asyncio.Task[None]] = []

    async def close_never() -> None:
        stubborn.append(asyncio.current_task())  # type: ignore[arg-type]
        await _stubborn(started, released)

    monkeypatch.setattr(ending, "STOP_SECONDS", 0.2)
    monkeypatch.setattr(hub.relay, "close", close_never)
    began = time.monotonic()
    await asyncio.wait_for(hub.stop(), 5)
    assert time.monotonic() - began < 3
    assert not hub.started
    await hub.start()  # it can start again
    monkeypatch.undo()
    await hub.stop()
    released.set()
    await asyncio.gather(*stubborn, return_exceptions=True)
