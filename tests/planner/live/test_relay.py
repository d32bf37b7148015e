"""The process's relay on the channel layer (production mode): memberships and control messages."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from django.conf import settings

from planner.agent import frames
from planner.live import broadcast as broadcast_module
from planner.live import relay as relay_module
from planner.live.broadcast import Broadcast
from planner.live.presence import _watchers_key
from planner.live.relay import Relay
from tests.planner.conftest import eventually
from tracker.errors import UnavailableError

pytestmark = pytest.mark.skipif(
    not settings.PRODUCTION_MODE, reason="the relay links processes over Redis (production mode)"
)


async def test_watchers_of_a_session_share_one_membership_until_the_last_leaves():
    delivered: list[tuple[uuid.UUID, list]] = []
    relay = Relay(
        deliver=lambda session, batch: delivered.append((session, batch)),
        control=lambda *_: None,
        lost=lambda: None,
        hear=lambda _: None,
    )
    session = uuid.uuid4()
    await relay.watch(session)
    await relay.watch(session)  # a second watcher here: no second membership
    watchers_key = _watchers_key(session)
    redis = relay._presence_started().client
    assert await redis.zcard(watchers_key) == 1
    broadcast = Broadcast()

    await broadcast.publish(session, [frames.text_delta("one")])
    await eventually(lambda: len(delivered) == 1, 3.0)
    await asyncio.sleep(0.2)
    assert delivered == [(session, [frames.text_delta("one")])]  # once, for both watchers

    await relay.unwatch(session)
    await broadcast.publish(session, [frames.text_delta("two")])
    await eventually(lambda: len(delivered) == 2, 3.0)

    await relay.unwatch(session)  # the last one: the process leaves the group
    assert await redis.zcard(watchers_key) == 0
    await broadcast.publish(session, [frames.text_delta("three")])
    await asyncio.sleep(0.3)
    assert [batch[0]["text"] for _, batch in delivered] == ["one", "two"]
    await relay.close()


async def test_control_messages_reach_the_process_serving_the_turn_and_a_replay_comes_back(monkeypatch):
    monkeypatch.setattr(relay_module, "SERVE_LINGER_SECONDS", 0.05)
    controls: list[tuple[uuid.UUID, dict]] = []
    session = uuid.uuid4()

    def control(session_id: uuid.UUID, message: dict):
        controls.append((session_id, message))
        if message["command"] == "replay":
            return owner.answer_replay(message, [frames.text_delta("so far")])
        return None

    owner = Relay(deliver=lambda *_: None, control=control, lost=lambda: None, hear=lambda _: None)
    # as if in another process:
    watcher = Relay(deliver=lambda *_: None, control=lambda *_: None, lost=lambda: None, hear=lambda _: None)
    await owner.serve(session)
    await Broadcast().send_control(session, "stop")
    await eventually(lambda: [m["command"] for _, m in controls] == ["stop"], 3.0)
    assert controls[0][0] == session
    assert await watcher.replay(session) == [frames.text_delta("so far")]

    await owner.unserve(session)
    await asyncio.sleep(0.3)  # the membership lingers for the session's next turn, then goes
    assert await watcher.replay(session) == []  # nobody serves the turn: no answer, no wait forever
    await owner.close()
    await watcher.close()


async def test_a_turn_s_control_membership_lingers_for_the_next_turn_then_goes(monkeypatch):
    monkeypatch.setattr(relay_module, "SERVE_LINGER_SECONDS", 0.5)
    # The keeper's check would join every group again whenever it finds Redis forgot this
    # process (another test flushed it): joins this test does not count.
    monkeypatch.setattr(relay_module, "CHECK_SECONDS", 3600.0)
    stops: list[uuid.UUID] = []
    owner = Relay(
        deliver=lambda *_: None,
        control=lambda session_id, _: stops.append(session_id),
        lost=lambda: None,
        hear=lambda _: None,
    )
    joins = []
    group_add = Broadcast.group_add

    async def counted(self: Broadcast, group: str, channel: str) -> None:
        joins.append(group)
        await group_add(self, group, channel)

    monkeypatch.setattr(Broadcast, "group_add", counted)
    session = uuid.uuid4()
    await owner.serve(session)  # the first turn joins the control group
    await owner.unserve(session)
    await owner.serve(session)  # the next message, within the linger: no trip to Redis
    await owner.unserve(session)
    assert len(joins) == 1
    await Broadcast().send_control(session, "stop")
    await eventually(lambda: stops == [session], 3.0)  # still heard while it lingers

    await asyncio.sleep(0.8)  # no turn came: the process left the group
    await Broadcast().send_control(session, "stop")
    await asyncio.sleep(0.3)
    assert stops == [session]
    await owner.serve(session)  # a later turn joins again
    assert len(joins) == 2
    await owner.close()


async def test_a_relay_whose_channel_could_not_be_opened_tries_again(monkeypatch):
    relay = Relay(deliver=lambda *_: None, control=lambda *_: None, lost=lambda: None, hear=lambda _: None)
    opened = relay._broadcast.new_channel
    calls = []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("Redis is restarting")
        return await opened()

    session = uuid.uuid4()
    await relay.watch(session)  # opens the channel: a watcher of the session is here
    monkeypatch.setattr(relay._broadcast, "new_channel", flaky)
    monkeypatch.setattr(relay, "_channel", "")  # as if this process had not opened one yet
    monkeypatch.setattr(relay, "_starting", None)
    with pytest.raises(UnavailableError):
        await relay.watch(session)  # a second watcher is refused (503), leaving nothing to undo ...
    await relay.watch(session)  # ... and the next one opens a channel after all
    assert len(calls) == 2
    redis = relay._presence_started().client
    assert await redis.zcard(_watchers_key(session)) == 1
    await relay.unwatch(session)
    await relay.unwatch(session)
    assert await redis.zcard(_watchers_key(session)) == 0
    await relay.close()


@pytest.mark.parametrize("rejoins_in", [0.05, None])
async def test_a_watch_while_the_relay_rejoins_waits_a_moment_for_it(monkeypatch, rejoins_in):
    relay = Relay(deliver=lambda *_: None, control=lambda *_: None, lost=lambda: None, hear=lambda _: None)
    session = uuid.uuid4()
    await relay.watch(session)  # started, on the channel layer
    back = asyncio.Event()

    async def rejoined() -> None:
        await back.wait()

    monkeypatch.setattr(relay_module, "REJOIN_WAIT_SECONDS", 0.3)
    relay._reconnecting = asyncio.get_running_loop().create_task(rejoined())  # as after Redis restarted
    if rejoins_in is not None:
        asyncio.get_running_loop().call_later(rejoins_in, back.set)
        await relay.watch(session)  # served once the rejoin ended (it was a 503 at once)
    else:
        with pytest.raises(UnavailableError):
            await relay.watch(session)  # still rejoining after the wait: refused, nothing to undo
        back.set()
        await relay.watch(session)
    await relay.unwatch(session)
    await relay.unwatch(session)
    redis = relay._presence_started().client
    assert await redis.zcard(_watchers_key(session)) == 0
    await relay.close()


def test_a_relay_that_ends_as_a_message_is_cleaned_up_leaves_the_next_loop_able_to_receive(monkeypatch):
    """channels-redis cleans a received message up in a task of its own, holding the channel's
    lock until it ends. A loop that ended before it (a worker's pass, a test) left that lock held
    for good, bound to the dead loop, and the next loop's relay lost the channel layer at its
    second message (CI, production mode). Each relay reads through a layer of its own."""
    layer_class = type(broadcast_module.layer())
    clean = layer_class._clean_receive_backup

    async def slow_clean(self, index, channel):
        await asyncio.sleep(0.3)
        await clean(self, index, channel)

    async def one_loop(texts: list[str], *, slow: bool) -> tuple[list[str], list[str]]:
        delivered: list[str] = []
        lost: list[str] = []
        relay = Relay(
            deliver=lambda _session, batch: delivered.extend(str(dict(frame)["text"]) for frame in batch),
            control=lambda *_: None,
            lost=lambda: lost.append("lost"),
            hear=lambda _: None,
        )
        session = uuid.uuid4()
        await relay.watch(session)
        with monkeypatch.context() as patched:
            if slow:
                patched.setattr(layer_class, "_clean_receive_backup", slow_clean)
            for count, text in enumerate(texts, start=1):
                await Broadcast().publish(session, [frames.text_delta(text)])
                await eventually(lambda count=count: len(delivered) == count, 3.0)
            await relay.close()  # the last message's clean-up still runs
        return delivered, lost

    # A loop that ends while the process lives on, with what still runs on it left there.
    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(one_loop(["one"], slow=True)) == (["one"], [])
    finally:
        loop.close()
    assert asyncio.run(one_loop(["two", "three", "four"], slow=False)) == (["two", "three", "four"], [])
