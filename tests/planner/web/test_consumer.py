"""The WebSocket of a planner session: auth, close codes, frames, bad frames, watchers."""

from __future__ import annotations

import json

import pytest
from channels import consumer as consumer_module
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.backends.db import SessionStore

from ballet.asgi import application
from planner.agent import frames
from planner.ground.turns import LiveTurn
from planner.live.hub import hub
from planner.live.outbox import NoOutbox
from planner.live.runner import runner
from planner.models import Message
from planner.web.routing import websocket_urlpatterns
from tests.factories import make_key
from tests.fakes.scripted import Hang, call, say
from tests.planner.conftest import frames_until, sync, ws_path
from tracker.models import Changeset
from tracker.services.activity import Actor
from tracker.services.projects import membership_set

pytestmark = pytest.mark.django_db(transaction=True)
router = URLRouter(websocket_urlpatterns)


async def connect(session, user) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(router, ws_path(session))
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def test_a_turn_over_the_websocket(scripted, session, member, make_item):
    await sync(make_item)(title="Export CSV", state="ready")
    scripted.add(call("list_runnable"), say("BAL-1 can run.", deltas=4))
    ws = await connect(session, member)
    state = await ws.receive_json_from()
    assert state == {"type": "state", "state": "idle", "last_seq": 0, "turn": 0}
    await ws.send_json_to({"type": "message", "text": "What can run?"})
    got = await frames_until(ws, "turn_ended")
    kinds = [f["type"] for f in got]
    assert kinds[:2] == ["user_message", "turn_started"]
    assert got[0]["text"] == "What can run?"
    assert got[0]["author"] == "member"
    assert "tool_call" in kinds
    assert "tool_result" in kinds
    assert "".join(f["text"] for f in got if f["type"] == "text_delta") == "BAL-1 can run."
    assert got[-1]["reason"] == "completed"
    assert all("origin" not in f for f in got)
    await ws.disconnect()


async def test_a_frame_costs_no_hop_to_the_thread_sensitive_executor(scripted, session, member, monkeypatch):
    """Channels closes old connections on Django's request thread before every frame; this
    consumer's database work runs on the runner's threads, so its frames skip that hop."""
    hops: list[str] = []

    async def hop() -> None:
        hops.append("close_old_connections")

    monkeypatch.setattr(consumer_module, "aclose_old_connections", hop)
    scripted.add(say("Hello."))
    ws = await connect(session, member)
    await ws.receive_json_from()
    await ws.send_json_to({"type": "message", "text": "Hi"})
    got = await frames_until(ws, "turn_ended")
    await ws.disconnect()

    assert got[-1]["reason"] == "completed"
    assert hops == []


async def test_close_codes(session, member, viewer, owner, users, chat_project):
    anonymous = WebsocketCommunicator(router, ws_path(session))
    anonymous.scope["user"] = AnonymousUser()
    await anonymous.connect()
    assert (await anonymous.receive_output())["code"] == 4401
    stranger = WebsocketCommunicator(router, ws_path(session))
    stranger.scope["user"] = users["stranger"]
    await stranger.connect()
    assert (await stranger.receive_output())["code"] == 4404
    other = WebsocketCommunicator(router, ws_path(session))
    other.scope["user"] = owner  # someone else's session: as good as unknown
    await other.connect()
    assert (await other.receive_output())["code"] == 4404
    await sync(membership_set)(
        actor=Actor(user=owner), project=chat_project, username="member", role="viewer"
    )
    demoted = WebsocketCommunicator(router, ws_path(session))
    demoted.scope["user"] = await sync(lambda: type(member).objects.get(pk=member.pk))()
    await demoted.connect()
    assert (await demoted.receive_output())["code"] == 4403


async def test_bad_frames_get_an_error_and_the_connection_stays(scripted, session, member):
    ws = await connect(session, member)
    await ws.receive_json_from()
    for text, code in [
        ("not json", "invalid_json"),
        (json.dumps({"type": "dance"}), "unknown_type"),
        (json.dumps(["message"]), "unknown_type"),
        (json.dumps({"type": "message"}), "invalid"),
        (json.dumps({"type": "message", "text": "   "}), "invalid"),
        (json.dumps({"type": "message", "text": "x" * 40_000}), "too_large"),
        ("x" * 200_000, "too_large"),
    ]:
        await ws.send_to(text_data=text)
        frame = await ws.receive_json_from()
        assert (frame["type"], frame["code"]) == ("error", code), text[:40]
    await ws.send_to(bytes_data=b"\x00\x01")
    assert (await ws.receive_json_from())["code"] == "invalid_frame"
    scripted.add(say("Still here."))
    await ws.send_json_to({"type": "message", "text": "Hello?"})
    got = await frames_until(ws, "turn_ended")
    assert got[-1]["reason"] == "completed"
    assert scripted.requests  # the model was asked only for the good message
    await ws.disconnect()


async def test_every_watcher_gets_the_same_frames_and_a_late_one_catches_up(scripted, session, member):
    hang = Hang(text="Part one. ", then=say("Part two."))
    scripted.add(hang)
    first = await connect(session, member)
    await first.receive_json_from()
    await first.send_json_to({"type": "message", "text": "Go"})
    await hang.started.wait()
    late = await connect(session, member)
    state = await late.receive_json_from()
    assert state["state"] == "running"
    hang.release.set()
    first_frames = await frames_until(first, "turn_ended")
    late_frames = await frames_until(late, "turn_ended")
    strip = lambda fs: [(f["type"], f.get("text")) for f in fs]  # noqa: E731
    # The late watcher's replay merges deltas; its text and order of frame kinds agree.
    assert (
        "".join(f.get("text", "") for f in late_frames if f["type"] == "text_delta") == "Part one. Part two."
    )
    assert [k for k, _ in strip(late_frames) if k != "text_delta"] == [
        k for k, _ in strip(first_frames) if k != "text_delta"
    ]
    await first.disconnect()
    await late.disconnect()


async def test_a_disconnect_does_not_end_the_turn(scripted, session, member):
    hang = Hang(text="Working", then=say("Done."))
    scripted.add(hang)
    ws = await connect(session, member)
    await ws.receive_json_from()
    await ws.send_json_to({"type": "message", "text": "Go"})
    await hang.started.wait()
    await ws.disconnect()
    hang.release.set()
    await runner.wait(session.pk)
    last = await sync(lambda: Message.objects.filter(session=session).order_by("-seq").first())()
    assert last.content == [{"type": "text", "text": "Done."}]


async def test_stop_over_the_websocket(scripted, session, member):
    hang = Hang(text="Long answer")
    scripted.add(hang)
    ws = await connect(session, member)
    await ws.receive_json_from()
    await ws.send_json_to({"type": "message", "text": "Go"})
    await hang.started.wait()
    await ws.send_json_to({"type": "stop"})
    got = await frames_until(ws, "turn_ended")
    assert got[-1]["reason"] == "stopped"
    await ws.disconnect()


async def test_a_proposed_changeset_reaches_the_socket_as_a_draft_naming_its_artifact(
    scripted, session, member
):
    operations = [{"op": "create", "kind": "ticket", "fields": {"title": "Export CSV"}}]
    scripted.add(call("propose_changeset", {"title": "Export", "operations": operations}), say("#1."))
    ws = await connect(session, member)
    await ws.receive_json_from()
    await ws.send_json_to({"type": "message", "text": "Plan an export"})
    got = await frames_until(ws, "turn_ended")
    (draft,) = [f for f in got if f["type"] == "draft"]
    number = await sync(lambda: Changeset.objects.get(project=session.project_id).number)()
    assert (draft["kind"], draft["artifact_id"]) == ("changeset", f"changeset:{number}")
    assert (draft["snapshot"]["number"], draft["snapshot"]["title"]) == (number, "Export")
    await ws.disconnect()


async def test_the_cookie_authenticates_and_the_origin_is_checked(session, member):
    store = SessionStore()
    store[SESSION_KEY] = str(member.pk)
    store[BACKEND_SESSION_KEY] = "tracker.trust.logins.HumanBackend"
    store[HASH_SESSION_KEY] = member.get_session_auth_hash()
    await sync(store.save)()
    cookie = f"sessionid={store.session_key}".encode()
    good = WebsocketCommunicator(
        application, ws_path(session), headers=[(b"cookie", cookie), (b"origin", b"http://127.0.0.1:8000")]
    )
    connected, _ = await good.connect()
    assert connected
    assert (await good.receive_json_from())["type"] == "state"
    await good.disconnect()
    evil = WebsocketCommunicator(
        application, ws_path(session), headers=[(b"cookie", cookie), (b"origin", b"http://evil.example")]
    )
    connected, _ = await evil.connect()
    assert not connected


@pytest.mark.parametrize("problem", ["no cookie", "unknown session", "stale password hash", "garbage"])
async def test_a_cookie_without_a_valid_login_is_closed_as_unauthenticated(session, member, problem):
    store = SessionStore()
    store[SESSION_KEY] = str(member.pk)
    store[BACKEND_SESSION_KEY] = "tracker.trust.logins.HumanBackend"
    store[HASH_SESSION_KEY] = (
        "not-the-hash" if problem == "stale password hash" else member.get_session_auth_hash()
    )
    await sync(store.save)()
    cookie = {
        "no cookie": b"csrftoken=abc",
        "unknown session": b"sessionid=0123456789abcdefghijklmnopqrstuv",
        "stale password hash": f"sessionid={store.session_key}".encode(),
        "garbage": b"sessionid=\xff\xfe; =;;",
    }[problem]
    ws = WebsocketCommunicator(
        application, ws_path(session), headers=[(b"cookie", cookie), (b"origin", b"http://127.0.0.1:8000")]
    )
    connected, _ = await ws.connect()
    assert connected
    assert (await ws.receive_output(timeout=5)) == {"type": "websocket.close", "code": 4401}
    await ws.wait()


@pytest.mark.parametrize("scheme", ["Bearer", "Token", "Api-Key"])
async def test_an_api_key_opens_no_socket(session, member, scheme):
    key = await sync(make_key)(member)
    headers = [(b"authorization", f"{scheme} {key}".encode()), (b"origin", b"http://127.0.0.1:8000")]
    ws = WebsocketCommunicator(application, ws_path(session), headers=headers)

    connected, _ = await ws.connect()

    assert connected
    assert (await ws.receive_output(timeout=5)) == {"type": "websocket.close", "code": 4401}
    await ws.wait()


async def test_a_watcher_that_falls_behind_gets_a_run_of_deltas_as_one_frame(session, member):
    watch = runner.watch(session_id=session.pk, user=member)
    assert (await anext(watch))["type"] == "state"
    live = LiveTurn(session_id=session.pk, turn=1, outbox=NoOutbox())
    hub.turns.start(live)
    try:
        for i in range(10):  # the watcher reads none of them meanwhile
            await hub.publish(session.pk, [frames.text_delta(f"w{i} ")])
        await hub.publish(session.pk, [frames.turn_ended(reason="completed")])
    finally:
        hub.turns.end(live)
    joined, ended = await anext(watch), await anext(watch)
    await watch.aclose()
    assert joined["type"] == "text_delta"
    assert joined["text"] == "".join(f"w{i} " for i in range(10))
    assert ended["type"] == "turn_ended"
    assert joined["n"] == ended["n"] - 1  # the run's last number: a reconnect dedupes by it
    caught_up = live.frames[0]
    assert caught_up["type"] == "text_delta"
    assert caught_up["text"] == joined["text"]  # a late watcher's catch-up joins them too
