"""Real daphne processes: a turn in one process stopped and watched from another, and a
process killed with SIGKILL mid-turn, then started again."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.fakes.client import Client, frames_until
from tests.fakes.messages_api import FakeMessagesAPI, HangReply, TextReply, ToolCallSpec, ToolUseReply
from tests.fakes.servers import PASSWORD, Deployment, Server, Worker, production_mode

pytestmark = pytest.mark.e2e


@pytest.fixture
def fake() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as api:
        yield api


@pytest.fixture
def deployment(tmp_path, fake) -> Iterator[Deployment]:
    created = Deployment.create(tmp_path, fake.base_url)
    yield created
    created.drop()


def start(deployment: Deployment, tmp_path, name: str) -> Server:
    return Server(deployment, log=tmp_path / f"{name}.log").start()


def wait_streaming(fake: FakeMessagesAPI, count: int = 1, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while len(fake.requests) < count:
        assert time.monotonic() < deadline, "the model was never called"
        time.sleep(0.02)


def test_a_process_killed_mid_turn_is_recovered_after_a_restart(tmp_path, fake, deployment):
    server = start(deployment, tmp_path, "first")
    try:
        client = Client(server.url, "demo", PASSWORD)
        session = client.post("/api/v1/planner/sessions/", {"project": "DEMO"})["id"]
        fake.enqueue(HangReply(after_deltas=2, reply=TextReply("Thinking hard about it", chunks=4)))
        assert (
            client.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": "Plan the beta"})["meaning"]
            == "started"
        )
        wait_streaming(fake)
        server.kill()
    finally:
        server.stop()
    restarted = start(deployment, tmp_path, "second")
    try:
        client = Client(restarted.url, "demo", PASSWORD)
        # Loading the session recovers it once its old process is known dead.
        body = client.wait_for(session, lambda b: b["state"] == "idle")
        ended = [e["data"] for e in body["events"] if e["kind"] == "turn_ended"]
        assert ended[-1]["reason"] == "failed"
        assert "process" in ended[-1]["error"]
        assert [m["kind"] for m in body["messages"]] == ["human"]
        fake.enqueue(TextReply("Back on track.", chunks=3))
        sent = client.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": "Are you there?"})
        assert sent["meaning"] == "started"
        body = client.wait_for(
            session, lambda b: b["state"] == "idle" and b["messages"][-1]["role"] == "assistant"
        )
        assert body["messages"][-1]["content"] == [{"type": "text", "text": "Back on track."}]
        assert [e["data"]["reason"] for e in body["events"] if e["kind"] == "turn_ended"] == [
            "failed",
            "completed",
        ]
        sent_history = fake.requests[-1].json["messages"]
        assert [m["role"] for m in sent_history] == ["user"]  # both human messages, merged: a valid history
    finally:
        restarted.stop()


@pytest.mark.skipif(
    not production_mode(), reason="several processes share state only with PostgreSQL and Redis"
)
def test_a_message_sent_just_after_a_restart_is_answered(tmp_path, fake, deployment):
    """The restarted page asks while the killed turn still looks alive (its heartbeat is fresh):
    the message is taken as steering. The worker's sweep recovers the dead turn and answers it."""
    worker = Worker(deployment, tmp_path).start()
    server = start(deployment, tmp_path, "killed")
    try:
        client = Client(server.url, "demo", PASSWORD)
        session = client.post("/api/v1/planner/sessions/", {"project": "DEMO"})["id"]
        fake.enqueue(HangReply(after_deltas=2, reply=TextReply("Thinking hard about it", chunks=4)))
        client.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": "Plan the beta"})
        wait_streaming(fake)
        server.kill()
    finally:
        server.stop()
    restarted = start(deployment, tmp_path, "restarted")
    try:
        fake.enqueue(TextReply("Yes, still here.", chunks=3))
        seen = asyncio.run(_ask_after_the_restart(Client(restarted.url, "demo", PASSWORD), session))
        ended = [f for f in seen if f["type"] == "turn_ended"]
        assert [(f["reason"], f.get("error", "")[:11]) for f in ended] == [
            ("failed", "The process"),
            ("completed", ""),
        ]
        steer = next(f for f in seen if f["type"] == "user_message")
        assert (steer["kind"], steer["text"]) == ("steer", "Are you still there?")
        assert seen.index(steer) < seen.index(ended[0])  # stored before the recovered end, shown so
        texts = [f["text"] for f in seen[seen.index(ended[0]) :] if f["type"] == "text_delta"]
        assert "".join(texts) == "Yes, still here."
        body = Client(restarted.url, "demo", PASSWORD).transcript(session)
        assert [m["kind"] for m in body["messages"]] == ["human", "steer", "assistant"]
        assert [e["data"]["reason"] for e in body["events"] if e["kind"] == "turn_ended"] == [
            "failed",
            "completed",
        ]
        (asked,) = fake.requests[-1].json["messages"]  # both human messages, merged: a valid history
        assert "Are you still there?" in json.dumps(asked)
    finally:
        restarted.stop()
        worker.stop()


async def _ask_after_the_restart(client: Client, session: str) -> list[dict]:
    """The page reconnects and asks at once; every frame until the answer's turn ends (within 30 s
    of the message, or the wait fails)."""
    async with client.websocket(session) as ws:
        state = json.loads(await ws.recv())
        assert (state["type"], state["state"]) == ("state", "running")  # not known dead yet
        sent = await asyncio.to_thread(
            client.post, f"/api/v1/planner/sessions/{session}/messages/", {"text": "Are you still there?"}
        )
        assert sent["meaning"] == "steered"
        seen: list[dict] = []
        async with asyncio.timeout(30):
            while not any(f["type"] == "turn_ended" and f["reason"] == "completed" for f in seen):
                seen.append(json.loads(await ws.recv()))
        return seen


@pytest.mark.skipif(
    not production_mode(), reason="several processes share state only with PostgreSQL and Redis"
)
def test_watch_and_stop_reach_a_turn_in_another_process(tmp_path, fake, deployment):
    first, second = start(deployment, tmp_path, "a"), start(deployment, tmp_path, "b")
    try:
        asyncio.run(_watch_and_stop(fake, first, second))
    finally:
        first.stop()
        second.stop()


async def _watch_and_stop(fake: FakeMessagesAPI, first: Server, second: Server) -> None:
    client = await asyncio.to_thread(Client, first.url, "demo", PASSWORD)
    session = (await asyncio.to_thread(client.post, "/api/v1/planner/sessions/", {"project": "DEMO"}))["id"]
    text = "".join(f"word{i} " for i in range(40))
    fake.enqueue(TextReply(text, chunks=[f"word{i} " for i in range(40)], delay_between_deltas=0.05))
    await asyncio.to_thread(client.post, f"/api/v1/planner/sessions/{session}/messages/", {"text": "Stream"})
    await asyncio.to_thread(wait_streaming, fake)
    await asyncio.sleep(0.3)  # some deltas are out before the watcher arrives
    async with client.websocket(session, base_url=second.url) as ws:
        got = await frames_until(ws, "turn_ended")
    assert got[0]["type"] == "state"
    assert got[0]["state"] == "running"
    assert "".join(f["text"] for f in got if f["type"] == "text_delta") == text
    assert got[-1]["reason"] == "completed"
    # Stop, sent to the second process, reaches the turn running in the first.
    fake.enqueue(
        HangReply(after_deltas=1, reply=TextReply("Never finishing", chunks=["Never ", "finishing"]))
    )
    await asyncio.to_thread(client.post, f"/api/v1/planner/sessions/{session}/messages/", {"text": "Again"})
    await asyncio.to_thread(wait_streaming, fake, 2)
    async with client.websocket(session, base_url=second.url) as ws:
        state = await frames_until(ws, "state")
        assert state[-1]["state"] == "running"
        await ws.send('{"type": "stop"}')
        got = await frames_until(ws, "turn_ended")
    assert got[-1]["reason"] == "stopped"
    body = await asyncio.to_thread(client.transcript, session)
    assert body["state"] == "idle"
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "Never "}]


def _healthz(server: Server) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"{server.url}/healthz", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


@pytest.mark.skipif(not production_mode(), reason="the relay runs only with Redis")
def test_healthz_stays_healthy_while_the_relay_receives(tmp_path, fake, deployment):
    server = start(deployment, tmp_path, "health")
    try:
        asyncio.run(_healthz_while_watching(fake, server))
    finally:
        server.stop()


async def _healthz_while_watching(fake: FakeMessagesAPI, server: Server) -> None:
    client = await asyncio.to_thread(Client, server.url, "demo", PASSWORD)
    session = (await asyncio.to_thread(client.post, "/api/v1/planner/sessions/", {"project": "DEMO"}))["id"]
    fake.enqueue(TextReply("All good.", chunks=3))
    await asyncio.to_thread(client.post, f"/api/v1/planner/sessions/{session}/messages/", {"text": "Hi"})
    async with client.websocket(session) as ws:  # a watch: the process's relay now receives
        await frames_until(ws, "state")
        status, body = await asyncio.to_thread(_healthz, server)
    assert (status, body["checks"]) == (200, {"database": True, "channel_layer": True, "relay": True})
    status, _ = await asyncio.to_thread(_healthz, server)  # and after the watcher left
    assert status == 200


def test_a_pending_request_survives_a_sigkill_and_is_answered_after_the_restart(tmp_path, fake, deployment):
    server = start(deployment, tmp_path, "paused")
    try:
        client = Client(server.url, "demo", PASSWORD)
        session = client.post("/api/v1/planner/sessions/", {"project": "DEMO"})["id"]
        ask = {"question": "Beta on Friday or Monday?", "options": ["Friday", "Monday"]}
        fake.enqueue(ToolUseReply([ToolCallSpec("ask_human", ask)], text_before="Let me ask."))
        client.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": "Plan the beta"})
        paused = client.wait_for(session, lambda b: b["state"] == "paused")
        (request,) = paused["requests"]
        assert (request["status"], request["options"]) == ("pending", ["Friday", "Monday"])
        server.kill()
    finally:
        server.stop()
    restarted = start(deployment, tmp_path, "resumed")
    try:
        client = Client(restarted.url, "demo", PASSWORD)
        body = client.transcript(session)
        assert (body["state"], body["requests"][0]["status"]) == ("paused", "pending")  # not "dead"
        fake.enqueue(TextReply("Monday, then.", chunks=2))
        answered = client.post(
            f"/api/v1/planner/sessions/{session}/answers/", {"request": request["id"], "text": "Monday"}
        )
        assert answered == {"outcome": "answered", "resumed": True, "waiting": None}
        body = client.wait_for(session, lambda b: b["state"] == "idle")
        assert body["messages"][-1]["content"] == [{"type": "text", "text": "Monday, then."}]
        assert [e["data"]["reason"] for e in body["events"] if e["kind"] == "turn_ended"] == ["completed"]
        (result,) = fake.requests[-1].json["messages"][-1]["content"]
        assert result["type"] == "tool_result"
        assert json.loads(result["content"]) == {"answer": "Monday", "answered_by": "demo"}
    finally:
        restarted.stop()


def test_a_title_lost_with_its_process_is_proposed_after_the_next_turn(tmp_path, fake, deployment):
    server = start(deployment, tmp_path, "titling")
    try:
        client = Client(server.url, "demo", PASSWORD)
        session = client.post("/api/v1/planner/sessions/", {"project": "DEMO"})["id"]
        fake.enqueue(TextReply("Beta on Monday.", chunks=2))
        fake.enqueue_title(HangReply())  # the title call is under way when the process dies
        client.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": "Plan the beta"})
        deadline = time.monotonic() + 10
        while not fake.title_requests:
            assert time.monotonic() < deadline, "the title was never asked for"
            time.sleep(0.02)
        server.kill()
    finally:
        server.stop()
    restarted = start(deployment, tmp_path, "titled")
    try:
        client = Client(restarted.url, "demo", PASSWORD)
        untitled = client.transcript(session)["title_source"]
        fake.enqueue(TextReply("Then the release.", chunks=2))
        fake.enqueue_title(TextReply("Beta planning"))
        client.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": "And after the beta?"})
        client.wait_for(session, lambda b: b["state"] == "idle" and b["turn_count"] == 2)
        deadline = time.monotonic() + 10
        body = client.transcript(session)
        while body["title_source"] == "" and time.monotonic() < deadline:
            time.sleep(0.1)
            body = client.transcript(session)
        assert {
            "after the death": untitled,
            "after the next turn": (body["title"], body["title_source"]),
            "title requests": len(fake.title_requests),
        } == {
            "after the death": "",
            "after the next turn": ("Beta planning", "planner"),
            "title requests": 2,
        }
    finally:
        restarted.stop()
