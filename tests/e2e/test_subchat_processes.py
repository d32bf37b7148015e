"""A sub-chat whose daphne is killed mid-turn (SPEC § 13.6, § 6.8), in production mode: the worker's
sweep recovers it, tells its parent, and resumes the parent, whose next model call carries the
sub-chat's failure as the call's result, with no daphne running meanwhile."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest

from tests.fakes.client import Client
from tests.fakes.messages_api import FakeMessagesAPI, HangReply, TextReply, ToolCallSpec, ToolUseReply
from tests.fakes.servers import PASSWORD, Deployment, Server, Worker, production_mode

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not production_mode(), reason="several processes share state only with PostgreSQL and Redis"
    ),
]

RECOVERY_SECONDS = 60  # the dead turn noticed (heartbeat), recovered and the parent resumed


@pytest.fixture
def fake() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as api:
        yield api


@pytest.fixture
def deployment(tmp_path, fake) -> Iterator[Deployment]:
    created = Deployment.create(tmp_path, fake.base_url, redis_url=os.environ.get("REDIS_URL"))
    yield created
    created.drop()


def wait_requests(fake: FakeMessagesAPI, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(fake.requests) < count:
        assert time.monotonic() < deadline, f"model call {count} never came ({len(fake.requests)} did)"
        time.sleep(0.05)


def test_the_sweep_resumes_the_parent_of_a_subchat_whose_daphne_was_killed(tmp_path, fake, deployment):
    worker = Worker(deployment, tmp_path).start()
    try:
        session, child = _kill_the_subchats_daphne(tmp_path, fake, deployment)
        wait_requests(fake, 3, RECOVERY_SECONDS)  # no daphne runs: the worker resumed the parent
        resumed = fake.requests[2].json["messages"]
        (result,) = [b for b in resumed[-1]["content"] if b.get("type") == "tool_result"]
        assert result.get("is_error") is True
        body = json.loads(result["content"])
        assert (body["session"], body["outcome"]) == (child, "failed")
        assert body["error"]["code"] == "subchat_failed"
        assert "process died" in body["error"]["message"]
        assert "Replan every epic" in json.dumps(resumed[0])  # the parent's own history
        restarted = Server(deployment, log=tmp_path / "after.log").start()
        try:
            client = Client(restarted.url, "demo", PASSWORD)
            parent = client.wait_for(session, lambda b: b["state"] == "idle")
            assert [e["data"]["reason"] for e in parent["events"] if e["kind"] == "turn_ended"] == [
                "completed"
            ]
            assert parent["messages"][-1]["content"] == [{"type": "text", "text": ANSWER}]
            ended = client.transcript(child)
            assert ended["state"] == "idle"
            assert [e["data"]["reason"] for e in ended["events"] if e["kind"] == "turn_ended"] == ["failed"]
        finally:
            restarted.stop()
    finally:
        worker.stop()


ANSWER = "The sub-chat died; I will replan Alpha here."


def _kill_the_subchats_daphne(tmp_path, fake: FakeMessagesAPI, deployment: Deployment) -> tuple[str, str]:
    """A parent paused on one sub-chat whose turn streams in a daphne, then SIGKILLed: the
    parent's and the sub-chat's ids."""
    server = Server(deployment, log=tmp_path / "killed.log").start()
    try:
        client = Client(server.url, "demo", PASSWORD)
        session: str = client.post("/api/v1/planner/sessions/", {"project": "DEMO"})["id"]
        brief = {"brief": "Replan the epic Alpha", "title": "Alpha"}
        fake.enqueue(
            ToolUseReply([ToolCallSpec("start_subchat", brief)], text_before="Splitting it."),
            HangReply(after_deltas=2, reply=TextReply("Working on Alpha for ever", chunks=4)),
            TextReply(ANSWER, chunks=2),
        )
        client.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": "Replan every epic"})
        wait_requests(fake, 2, 15)  # the sub-chat's turn is streaming
        (child,) = [row["id"] for row in client.get(f"/api/v1/planner/sessions/?parent={session}")["results"]]
        server.kill()  # SIGKILL: the sub-chat's turn loses its process
    finally:
        server.stop()
    return session, str(child)
