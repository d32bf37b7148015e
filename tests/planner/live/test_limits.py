"""The planner's limits (docs/trust.md#limits): messages, running turns, steering, WebSocket frames."""

from __future__ import annotations

import asyncio
import json

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from planner.domain.services.sessions import session_create
from planner.live.runner import runner
from planner.models import Message
from planner.web.consumers import FrameMeter
from tests.fakes.scripted import Hang, say
from tests.planner.conftest import frames_until, open_socket, sync
from tracker.errors import RateLimitedError

pytestmark = pytest.mark.django_db(transaction=True)


async def messages_of(session) -> list[str]:
    rows = await sync(lambda: list(Message.objects.filter(session=session).order_by("seq")))()
    return [block["text"] for row in rows for block in row.content if block.get("type") == "text"]


async def test_messages_per_minute_are_counted_per_user(scripted, limits, session, member):
    limits(messages_per_minute=3)
    for n in range(3):
        scripted.add(say(f"Answer {n}."))
        await runner.send(session_id=session.pk, user=member, text=f"Question {n}")
        await runner.wait(session.pk)
    with pytest.raises(RateLimitedError, match="at most 3 a minute"):
        await runner.send(session_id=session.pk, user=member, text="One more")
    assert "One more" not in await messages_of(session)
    other = await sync(session_create)(user=member, project=session.project)  # per user, not per session
    with pytest.raises(RateLimitedError):
        await runner.send(session_id=other.pk, user=member, text="Elsewhere")


def test_a_refused_message_over_rest_is_a_429(client, limits, session, member):
    limits(messages_per_minute=1, running_turns_per_user=5)
    client.force_login(member)
    url = f"/api/v1/planner/sessions/{session.pk}/messages/"
    first = client.post(url, {"text": "First"}, content_type="application/json")
    assert first.status_code == 202
    second = client.post(url, {"text": "Second"}, content_type="application/json")
    assert second.status_code == 429
    assert second.json()["error"]["code"] == "rate_limited"
    assert "a minute" in second.json()["error"]["message"]


def test_a_message_the_cache_cannot_count_is_a_503_with_nothing_written(client, session, member, monkeypatch):
    """Redis gone under the message rate's count: refused before anything is written, readable."""

    def down(**_: object) -> bool:
        raise RedisConnectionError("Connection refused")

    monkeypatch.setattr("planner.domain.services.sessions.begin.rate_hit", down)
    client.force_login(member)
    sent = client.post(
        f"/api/v1/planner/sessions/{session.pk}/messages/", {"text": "First"}, content_type="application/json"
    )

    assert sent.status_code == 503
    assert sent.json()["error"]["code"] == "unavailable"
    assert "try again in a few seconds" in sent.json()["error"]["message"]
    assert not Message.objects.filter(session=session).exists()


async def test_running_turns_per_user(scripted, limits, session, member):
    limits(running_turns_per_user=1)
    hang = Hang(text="Busy")
    scripted.add(hang, say("Now free."))
    await runner.send(session_id=session.pk, user=member, text="Long job")
    await hang.started.wait()
    second = await sync(session_create)(user=member, project=session.project)
    with pytest.raises(RateLimitedError, match="1 planner turns running"):
        await runner.send(session_id=second.pk, user=member, text="Another")
    assert await messages_of(second) == []
    hang.release.set()
    await runner.wait(session.pk)
    begin = await runner.send(session_id=second.pk, user=member, text="Another")
    assert begin.meaning == "started"
    await runner.wait(second.pk)


async def test_running_turns_per_project(scripted, limits, session, member, users):
    limits(running_turns_per_project=1)
    hang = Hang(text="Busy")
    scripted.add(hang)
    await runner.send(session_id=session.pk, user=member, text="Long job")
    await hang.started.wait()
    theirs = await sync(session_create)(user=users["maintainer"], project=session.project)
    with pytest.raises(RateLimitedError, match="already running in BAL"):
        await runner.send(session_id=theirs.pk, user=users["maintainer"], text="Mine too")
    await runner.stop(session_id=session.pk, user=member)
    await runner.wait(session.pk)


async def test_steering_waits_at_most_n_messages_and_k_characters(scripted, limits, session, member):
    limits(steering_queued=2, steering_chars=100)
    hang = Hang(text="Working")
    scripted.add(hang, say("Read your notes."))
    await runner.send(session_id=session.pk, user=member, text="Go")
    await hang.started.wait()
    assert (await runner.send(session_id=session.pk, user=member, text="a" * 60)).meaning == "steered"
    with pytest.raises(RateLimitedError, match="at most 100 characters"):
        await runner.send(session_id=session.pk, user=member, text="b" * 41)
    assert (await runner.send(session_id=session.pk, user=member, text="c" * 40)).meaning == "steered"
    with pytest.raises(RateLimitedError, match="2 messages already wait"):
        await runner.send(session_id=session.pk, user=member, text="d")
    hang.release.set()
    await runner.wait(session.pk)
    texts = await messages_of(session)
    assert "a" * 60 in texts
    assert "c" * 40 in texts  # what was accepted reached the model's history
    assert "b" * 41 not in texts
    assert "d" not in texts


def test_the_frame_meter_refuses_then_closes_a_persistent_flood():
    meter = FrameMeter(per_second=3, grace_seconds=2)
    assert [meter.take(10.1) for _ in range(5)] == ["accept"] * 3 + ["refuse", "drop"]
    assert meter.take(11.0) == "accept"  # a new second
    assert [meter.take(11.5) for _ in range(3)] == ["accept", "accept", "refuse"]
    assert [meter.take(12.2) for _ in range(4)][-1] == "close"  # over the limit for 2 s in a row


def test_the_frame_meter_forgives_a_flood_that_stopped():
    meter = FrameMeter(per_second=2, grace_seconds=2)
    assert [meter.take(1.0) for _ in range(3)][-1] == "refuse"
    assert meter.take(2.5) == "accept"  # second 2 keeps to the limit
    assert [meter.take(3.0) for _ in range(3)][-1] == "refuse"  # a new run of excess begins
    assert [meter.take(4.0) for _ in range(3)][-1] == "refuse"
    assert [meter.take(5.0) for _ in range(3)][-1] == "close"


async def test_a_socket_over_its_frame_rate_gets_one_error_a_second(limits, session, member):
    limits(frames_per_second=3)
    ws = await open_socket(session, member)
    for _ in range(8):
        await ws.send_json_to({"type": "stop"})
    error = await ws.receive_json_from(timeout=5)
    assert error == {
        "type": "error",
        "code": "rate_limited",
        "message": "At most 3 frames a second; this one was ignored.",
    }
    assert await ws.receive_nothing(timeout=0.3)  # one error, not one per refused frame
    await ws.disconnect()


async def test_a_socket_that_keeps_flooding_is_closed_with_4429(limits, session, member):
    limits(frames_per_second=2, frames_excess_seconds=1)
    ws = await open_socket(session, member)
    closed = None
    for _ in range(40):
        for _ in range(4):
            await ws.send_json_to({"type": "stop"})
        await asyncio.sleep(0.1)
        while not await ws.receive_nothing(timeout=0.01):
            output = await ws.receive_output()
            if output["type"] == "websocket.close":
                closed = output["code"]
        if closed:
            break
    assert closed == 4429


async def test_a_deeply_nested_frame_gets_an_error_and_the_socket_stays(scripted, session, member):
    ws = await open_socket(session, member)
    await ws.send_to(text_data="[" * 50_000 + "]" * 50_000)
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("error", "invalid_json")
    deep_message = json.dumps({"type": "message", "text": "ok", "extra": {}}).replace(
        "{}", "[" * 3000 + "]" * 3000
    )
    await ws.send_to(text_data=deep_message)
    assert (await ws.receive_json_from(timeout=5))["code"] == "invalid_json"
    scripted.add(say("Still here."))
    await ws.send_json_to({"type": "message", "text": "Hello?"})
    assert (await frames_until(ws, "turn_ended"))[-1]["reason"] == "completed"
    await ws.disconnect()
