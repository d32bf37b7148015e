"""The planner over REST: sessions, messages with their three meanings, stop, transcript, usage."""

from __future__ import annotations

import uuid

import pytest
from django.test import AsyncClient

from planner.live.runner import runner
from tests.fakes.scripted import Hang, call, say
from tests.planner.api_client import client_for
from tests.planner.conftest import sync

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_session_driven_over_rest(scripted, chat_project, member, make_item):
    await sync(make_item)(title="Checkout page", state="ready")
    client = await client_for(member)
    created = await client.post(
        "/api/v1/planner/sessions/", {"project": "BAL"}, content_type="application/json"
    )
    assert created.status_code == 201, created.content
    session_id = created.json()["id"]
    scripted.add(call("list_runnable"), say("BAL-1 is runnable."))
    sent = await client.post(
        f"/api/v1/planner/sessions/{session_id}/messages/",
        {"text": "What can run?"},
        content_type="application/json",
    )
    assert sent.status_code == 202
    assert sent.json()["meaning"] == "started"
    await runner.wait(uuid.UUID(session_id))
    detail = await client.get(f"/api/v1/planner/sessions/{session_id}")
    assert detail.status_code == 200
    body = detail.json()
    assert body["state"] == "idle"
    assert [m["kind"] for m in body["messages"]] == ["human", "assistant", "tool_results", "assistant"]
    assert body["tool_calls"][0]["name"] == "list_runnable"
    assert [e["kind"] for e in body["events"]] == ["turn_started", "turn_ended"]
    usage = await client.get("/api/v1/projects/BAL/usage/")
    assert usage.status_code == 200
    title, row = usage.json()["results"]  # by model: the title's after the first turn, then the turn's
    assert (title["model"], title["calls"]) == ("claude-haiku-4-5", 1)
    assert (row["calls"], row["input_tokens"], row["output_tokens"]) == (2, 200, 40)
    listed = await client.get("/api/v1/planner/sessions/?project=BAL")
    assert listed.json()["results"][0]["id"] == session_id


async def test_steer_and_stop_over_rest(scripted, chat_project, member):
    client = await client_for(member)
    session_id = (
        await client.post("/api/v1/planner/sessions/", {"project": "BAL"}, content_type="application/json")
    ).json()["id"]
    hang = Hang(text="Thinking…")
    scripted.add(hang)
    await client.post(
        f"/api/v1/planner/sessions/{session_id}/messages/", {"text": "Plan"}, content_type="application/json"
    )
    await hang.started.wait()
    steered = await client.post(
        f"/api/v1/planner/sessions/{session_id}/messages/",
        {"text": "Faster"},
        content_type="application/json",
    )
    assert steered.json()["meaning"] == "steered"
    stopped = await client.post(f"/api/v1/planner/sessions/{session_id}/stop/")
    assert stopped.json() == {"stopped": True}
    # Wait for the turn to end before reading it: the stop's last write ends with the turn.
    await runner.wait(uuid.UUID(session_id))
    body = (await client.get(f"/api/v1/planner/sessions/{session_id}/")).json()
    assert body["events"][-1]["data"]["reason"] == "stopped"
    # The partial answer is kept, and the steering the stopped turn never read is stored after it,
    # before anything sent later.
    assert [m["content"] for m in body["messages"][-2:]] == [
        [{"type": "text", "text": "Thinking…"}],
        [{"type": "text", "text": "Faster"}],
    ]
    assert body["messages"][-1]["kind"] == "steer"
    again = await client.post(f"/api/v1/planner/sessions/{session_id}/stop/")
    assert again.json() == {"stopped": False}


async def test_rest_errors(scripted, chat_project, member, viewer, users, other_project):
    client = await client_for(member)
    assert (
        await client.post("/api/v1/planner/sessions/", {"project": "OTH"}, content_type="application/json")
    ).status_code == 404
    bad = await client.post(
        "/api/v1/planner/sessions/", {"project": "BAL", "colour": 1}, content_type="application/json"
    )
    assert bad.status_code == 400
    assert "colour" in bad.json()["error"]["fields"]
    viewer_client = await client_for(viewer)
    assert (
        await viewer_client.post(
            "/api/v1/planner/sessions/", {"project": "BAL"}, content_type="application/json"
        )
    ).status_code == 403
    session_id = (
        await client.post("/api/v1/planner/sessions/", {"project": "BAL"}, content_type="application/json")
    ).json()["id"]
    empty = await client.post(
        f"/api/v1/planner/sessions/{session_id}/messages/", {"text": "  "}, content_type="application/json"
    )
    assert empty.status_code == 400
    huge = await client.post(
        f"/api/v1/planner/sessions/{session_id}/messages/",
        {"text": "x" * 40_000},
        content_type="application/json",
    )
    assert huge.status_code == 400
    malformed = await client.post(
        f"/api/v1/planner/sessions/{session_id}/messages/", "{nope", content_type="application/json"
    )
    assert malformed.status_code == 400
    stranger = await client_for(users["stranger"])
    assert (await stranger.get(f"/api/v1/planner/sessions/{session_id}")).status_code == 404
    assert (await viewer_client.get(f"/api/v1/planner/sessions/{session_id}")).status_code == 404
    assert (await client.get("/api/v1/planner/sessions/not-a-uuid")).status_code == 404
    assert (await AsyncClient().get(f"/api/v1/planner/sessions/{session_id}")).status_code == 401
    assert scripted.requests == []


async def test_metrics_count_turns_tools_tokens_and_latency(scripted, chat_project, member):
    client = await client_for(member)
    session_id = (await client.post("/api/v1/planner/sessions/", {"project": "BAL"})).json()["id"]
    scripted.add(call("list_items"), say("Nothing yet."))
    await client.post(f"/api/v1/planner/sessions/{session_id}/messages/", {"text": "Hi"})
    await runner.wait(uuid.UUID(session_id))
    text = (await AsyncClient().get("/metrics")).content.decode()
    for metric in (
        'ballet_planner_turns_total{reason="completed"}',
        'ballet_planner_tool_calls_total{outcome="ok",tool="list_items"}',
        "ballet_planner_compactions_total",
    ):
        assert metric in text, metric
