"""The live layer's own guarantees: one liveness signal, a turn's writes and end only
while it is still the session's turn, steering never lost by a recovery, recoveries told to
watchers, a dropped database connection retried, and a channel layer that is down refused
clearly (503, close code 4503) instead of accepting what it could not deliver."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connection, connections
from django.utils import timezone

from planner.agent.messages import ChatMessage, TextBlock
from planner.domain.services.sessions import (
    RECOVERED,
    TurnSupersededError,
    message_save,
    recovery,
    session_begin,
    turn_end,
)
from planner.ground.bridge import db
from planner.ground.process import DEAD_AFTER, PROCESS_ID, owner_alive
from planner.live import broadcast
from planner.live.hub import hub
from planner.live.runner import runner
from planner.models import Event, Message, Session
from planner.tasks import recover_dead_turns
from planner.web.routing import websocket_urlpatterns
from tests.fakes.scripted import Hang, say
from tests.planner.conftest import open_socket, sync, ws_path
from tests.planner.web.test_api import client_for
from tracker.errors import UnavailableError

pytestmark = pytest.mark.django_db(transaction=True)


def _recovered_elsewhere(session) -> None:
    """What another process does when it takes this process's turn for dead: recover it."""
    Session.objects.filter(pk=session.pk).update(turn_owner="elsewhere:1:dead", heartbeat_at=None)
    row = Session.objects.get(pk=session.pk)
    recovery._recover(row)


def test_a_fresh_heartbeat_is_alive_whatever_redis_says(settings):
    settings.ONE_PROCESS = False
    fresh, stale = timezone.now() - timedelta(seconds=1), timezone.now() - DEAD_AFTER
    session_id = uuid.uuid4()
    # No presence key anywhere: the heartbeat alone decides.
    assert owner_alive(session_id=session_id, owner="other:1:aaaa", heartbeat_at=fresh)
    assert not owner_alive(session_id=session_id, owner="other:1:aaaa", heartbeat_at=stale)
    # Not running here:
    assert not owner_alive(session_id=session_id, owner=PROCESS_ID, heartbeat_at=fresh)
    hub.turns.claim(session_id)
    try:
        assert owner_alive(session_id=session_id, owner=PROCESS_ID, heartbeat_at=stale)
    finally:
        hub.turns.release(session_id)


def test_the_end_and_the_writes_of_a_superseded_turn_change_nothing(chat_project, member, session):
    session_begin(session_id=session.pk, user=member, text="Plan the beta")
    _recovered_elsewhere(session)
    answer = ChatMessage(role="assistant", content=(TextBlock("late"),), kind="assistant")
    with pytest.raises(TurnSupersededError):
        message_save(session_id=session.pk, turn=1, after_seq=1, message=answer)
    assert turn_end(session_id=session.pk, turn=1, reason="completed", error=None).status == "superseded"
    row = Session.objects.get(pk=session.pk)
    assert (row.state, row.last_message_seq) == ("idle", 1)
    assert [e.data["reason"] for e in Event.objects.filter(session=session, kind="turn_ended")] == ["failed"]


async def test_a_turn_recovered_while_it_ran_goes_quiet(scripted, chat_project, member, session):
    hang = Hang(text="thinking", then=say("too late"))
    scripted.add(hang)
    ws = await open_socket(session, member)
    await runner.send(session_id=session.pk, user=member, text="Plan the beta")
    await hang.started.wait()
    await sync(_recovered_elsewhere)(session)
    hang.release.set()
    await runner.wait(session.pk)
    row = await sync(Session.objects.get)(pk=session.pk)
    assert row.state == "idle"
    kinds = await sync(lambda: list(Message.objects.filter(session=session).values_list("kind", flat=True)))()
    assert kinds == ["human"]  # the late answer was not written into the recovered session
    ended = await sync(lambda: list(Event.objects.filter(session=session, kind="turn_ended")))()
    assert [e.data["reason"] for e in ended] == ["failed"]  # the recovery's, and no second end
    seen = []
    while not await ws.receive_nothing(timeout=0.3):
        seen.append((await ws.receive_json_from())["type"])
    assert "turn_ended" not in seen  # the superseded turn tells nobody it "completed"
    await ws.disconnect()


def test_steering_waiting_for_a_dead_turn_is_kept_by_its_recovery(chat_project, member, session):
    session_begin(session_id=session.pk, user=member, text="Plan the beta")
    Session.objects.filter(pk=session.pk).update(
        turn_owner="gone:1:dead", heartbeat_at=timezone.now() - timedelta(minutes=5)
    )
    # Another process took the turn for alive a moment ago and queued this as steering.
    Session.objects.filter(pk=session.pk).update(
        steering=[{"text": "Also the docs", "author": member.username}]
    )
    assert recover_dead_turns() == 1
    messages = list(Message.objects.filter(session=session).order_by("seq"))
    assert [(m.kind, m.content[0]["text"]) for m in messages] == [
        ("human", "Plan the beta"),
        ("steer", "Also the docs"),
    ]
    assert messages[-1].author == member
    assert Session.objects.get(pk=session.pk).steering == []


async def test_every_watcher_hears_of_a_recovery(chat_project, member, session):
    await sync(session_begin)(session_id=session.pk, user=member, text="Plan the beta")
    hub.turns.claim(session.pk)  # the turn looks alive while the first watcher connects
    try:
        first = await open_socket(session, member)
    finally:
        hub.turns.release(session.pk)
    # The second watcher finds the turn dead: it is recovered, and the first is told.
    second = await open_socket(session, member)
    notice = await first.receive_json_from(timeout=5)
    assert notice["type"] == "turn_ended"
    assert notice["reason"] == "failed"
    assert notice["error"] == RECOVERED
    # Its state frame already said idle. Over a channel layer the recovery's notice can reach it
    # too, when its watch began before the notice came round: that notice again, nothing else.
    if not await second.receive_nothing(timeout=0.2):
        again = await second.receive_json_from(timeout=1)
        assert (again["type"], again["reason"], again["error"]) == ("turn_ended", "failed", RECOVERED)
        assert await second.receive_nothing(timeout=0.2)
    await first.disconnect()
    await second.disconnect()


@pytest.mark.skipif(not settings.PRODUCTION_MODE, reason="one process: nothing to tell over a channel layer")
async def test_the_sweep_announces_what_it_recovered_on_the_channel_layer(chat_project, member, session):
    await sync(session_begin)(session_id=session.pk, user=member, text="Plan the beta")
    await sync(Session.objects.filter(pk=session.pk).update)(
        turn_owner="gone:1:dead", heartbeat_at=timezone.now() - timedelta(minutes=5)
    )
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(broadcast.frames_group(session.pk), channel)
    assert await sync(recover_dead_turns)() == 1
    message = await asyncio.wait_for(layer.receive(channel), timeout=5)
    assert [frame["type"] for frame in message["frames"]] == ["turn_ended"]
    assert message["frames"][0]["error"] == RECOVERED


@pytest.mark.skipif(not settings.PRODUCTION_MODE, reason="only PostgreSQL connections can be dropped")
async def test_a_dropped_database_connection_is_retried_once(chat_project, session):
    def backend() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return int(cursor.fetchone()[0])

    first = await db(backend)()

    def terminate() -> None:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [first])

    await sync(terminate)()
    second = await db(backend)()  # the call met the dead connection, and was made again
    assert second != first
    assert await db(lambda: Session.objects.filter(pk=session.pk).count())() == 1


async def test_a_message_while_the_channel_layer_is_down_is_refused_and_writes_nothing(
    monkeypatch, scripted, chat_project, member, session
):
    async def down(session_id):
        raise UnavailableError(
            "Ballet's live channel (Redis) is unavailable right now; try again in a few seconds."
        )

    monkeypatch.setattr(hub.relay, "serve", down)
    client = await client_for(member)
    response = await client.post(
        f"/api/v1/planner/sessions/{session.pk}/messages/", {"text": "Hello"}, content_type="application/json"
    )
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "unavailable"
    assert await sync(Message.objects.filter(session=session).count)() == 0
    assert (await sync(Session.objects.get)(pk=session.pk)).state == "idle"


async def test_a_watch_the_channel_layer_cannot_serve_closes_with_4503(
    monkeypatch, chat_project, member, session
):
    async def down(session_id):
        raise UnavailableError("down")

    monkeypatch.setattr(hub.relay, "watch", down)
    ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), ws_path(session))
    ws.scope["user"] = member
    connected, _ = await ws.connect()
    assert connected
    assert await ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 4503}
    await ws.wait()


async def test_watchers_are_closed_with_4503_when_the_relay_loses_the_channel_layer(
    chat_project, member, session
):
    ws = await open_socket(session, member)
    hub._lost()  # what the relay calls when its receive fails or Redis forgot the process
    assert await ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 4503}
    await ws.wait()


@pytest.mark.skipif(not settings.PRODUCTION_MODE, reason="the channel layer is Redis in production mode")
def test_a_dead_process_s_group_memberships_expire_within_minutes():
    layer = get_channel_layer()
    assert layer.group_expiry <= 300
