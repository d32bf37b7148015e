"""/metrics of a production deployment: one scrape of any daphne shows what every process
of the host counted, two daphnes and a Celery worker, a process killed with SIGKILL too."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ballet.metrics import OWN
from tests.fakes.client import Client
from tests.fakes.messages_api import FakeMessagesAPI, HangReply, TextReply, ToolCallSpec, ToolUseReply
from tests.fakes.servers import PASSWORD, Deployment, Server, Worker, production_mode

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not production_mode(),
        reason="several daphnes and a Celery worker side by side are the production mode's",
    ),
]

RECOVERY_SECONDS = 45  # a dead turn's process is noticed and the turn recovered within this
ENV = {"BALLET_SEARCH_EMBEDDING_BACKEND": "tracker.search.embeddings.HashingBackend"}
MESSAGES_VIEW = "planner-api:session-messages"


@dataclass
class Scrape:
    values: dict[tuple[str, frozenset[tuple[str, str]]], float]

    def __call__(self, name: str, **labels: str) -> float:
        return self.values.get((name, frozenset(labels.items())), 0.0)


def scrape(server: Server) -> Scrape:
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return Scrape(
        {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }
    )


def run_turn(client: Client, session: str, text: str) -> None:
    client.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": text})
    client.wait_for(session, lambda body: body["state"] == "idle" and bool(body["events"]))


def wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.25)


@pytest.fixture
def fake() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as api:
        yield api


@pytest.fixture
def deployment(tmp_path: Path, fake: FakeMessagesAPI) -> Iterator[Deployment]:
    created = Deployment.create(tmp_path, fake.base_url, extra_env=ENV)
    yield created
    created.drop()


def test_one_scrape_adds_up_both_daphnes_and_the_worker(tmp_path, fake, deployment):
    worker = Worker(deployment, tmp_path)
    a = Server(deployment, log=tmp_path / "a.log")
    b = Server(deployment, log=tmp_path / "b.log")
    again = Server(deployment, log=tmp_path / "b-again.log")
    try:
        worker.start()
        a.start(wait=False)
        b.start()
        a.wait_ready()
        on_a, on_b = Client(a.url, "demo", PASSWORD), Client(b.url, "demo", PASSWORD)
        sessions = [on_a.post("/api/v1/planner/sessions/", {"project": "DEMO"})["id"] for _ in range(3)]

        fake.enqueue(ToolUseReply([ToolCallSpec("list_items", {})]), TextReply("Nothing planned yet."))
        run_turn(on_a, sessions[0], "What is planned?")  # A: a turn and a tool call
        fake.enqueue(TextReply("Hello."))
        run_turn(on_b, sessions[1], "Hi")  # B: a turn
        # B dies mid-turn: what it counted stays, and the worker's sweep counts the turn it lost.
        fake.enqueue(HangReply(after_deltas=1, reply=TextReply("Never finished", chunks=2)))
        on_b.post(f"/api/v1/planner/sessions/{sessions[2]}/messages/", {"text": "Plan the beta"})
        wait(lambda: len(fake.requests) == 4, 10, "the model was never called for the third turn")
        assert b.process is not None
        dead = b.process.pid
        b.kill()
        wait(
            lambda: scrape(a)("ballet_planner_turns_total", reason="failed") == 1,
            RECOVERY_SECONDS,
            "the worker's recovery of the dead turn never showed on A",
        )
        assert "recovered 1 planner session(s)" in worker.log.read_text()

        again.start()  # a new process folds the dead one's files
        fake.enqueue(TextReply("Back again."))
        run_turn(Client(again.url, "demo", PASSWORD), sessions[1], "Still there?")
        seen = [scrape(server) for server in (a, again)]
    finally:
        for server in (a, b, again):
            server.stop()
        worker.stop()

    for metrics in seen:
        assert metrics("ballet_planner_turns_total", reason="completed") == 3  # A, B and B again
        assert metrics("ballet_planner_turns_total", reason="failed") == 1  # the worker
        assert metrics("ballet_planner_tool_calls_total", tool="list_items", outcome="ok") == 1
        # Model calls: two on A, one on B (its last never ended), one on B again.
        assert metrics("ballet_llm_requests_total", purpose="turn", outcome="ok") == 4
        posted = metrics(
            "django_http_requests_total_by_view_transport_method_total",
            view=MESSAGES_VIEW,
            transport="http",
            method="POST",
        )
        assert posted == 4  # one on A, two on B before it died, one on B again
    left = {path.name for path in Path(deployment.env["BALLET_METRICS_DIR"]).iterdir()}
    assert not [name for name in left if (match := OWN.fullmatch(name)) and int(match["pid"]) == dead], left
