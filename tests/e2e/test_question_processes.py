"""Agents' questions across real processes (two daphnes, a Celery worker with beat, PostgreSQL,
Redis): agents waiting on one process, over REST and MCP, hear the answer the planner gives on the
other during their wait; a question whose sub-chat's process is killed mid-turn gets an outcome the
waiting agent hears, and a question the running-turn limits held back starts even though the
process that queued it died, and one about a ticket that waited behind a full project starts once a
turn is free and its asker's wait, on the other process, hears its answer."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import agent_key
from tests.e2e.test_mcp import body, mcp_session
from tests.e2e.test_processes import wait_streaming
from tests.fakes.client import Client
from tests.fakes.messages_api import FakeMessagesAPI, HangReply, TextReply, ToolCallSpec, ToolUseReply
from tests.fakes.servers import Deployment, Server, Worker, production_mode

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not production_mode(), reason="several processes share state only in production mode"),
]

QUESTIONS = "/api/v1/projects/DEMO/questions/"


@pytest.fixture
def fake() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as api:
        yield api


@pytest.fixture
def deployment(tmp_path, fake) -> Iterator[Deployment]:
    # One turn at a time per user: the agent's second question waits for the first's turn.
    created = Deployment.create(
        tmp_path, fake.base_url, extra_env={"BALLET_LIMIT_RUNNING_TURNS_PER_USER": "1"}
    )
    yield created
    created.drop()


def started(tmp_path, deployment: Deployment) -> tuple[Server, Server, Worker]:
    """Two daphnes and a worker with its beat on ``deployment``."""
    first = Server(deployment, log=tmp_path / "a.log").start()
    second = Server(deployment, log=tmp_path / "b.log").start()
    return first, second, Worker(deployment, tmp_path).start()


@pytest.fixture
def processes(tmp_path, deployment) -> Iterator[tuple[Server, Server, Worker]]:
    running = started(tmp_path, deployment)
    yield running
    for process in running:
        process.stop()


@pytest.fixture
def one_turn_a_project(tmp_path, fake) -> Iterator[tuple[Server, Server, Worker]]:
    """Two daphnes and a worker of a deployment where a project runs one turn at a time."""
    deployment = Deployment.create(
        tmp_path, fake.base_url, extra_env={"BALLET_LIMIT_RUNNING_TURNS_PER_PROJECT": "1"}
    )
    running = started(tmp_path, deployment)
    yield running
    for process in running:
        process.stop()
    deployment.drop()


def agent_on(server: Server, key: str) -> Client:
    """The demo's worker ``agent`` on ``server``, with ``key``."""
    client = Client.__new__(Client)
    client.base_url, client.token = server.url, key
    return client


def test_agents_waiting_on_one_process_hear_the_answer_given_on_the_other(fake, processes):
    """The question's turn runs on the first process, held until both agents wait on the second
    (one over REST, one over MCP): the answer reaches them during their waits."""
    first, second, _ = processes
    key = agent_key(first)
    release = threading.Event()
    answer = ToolUseReply([ToolCallSpec("answer_question", {"answer": "8000, as make run says."})])
    fake.enqueue(HangReply(reply=answer, release=release), TextReply("Answered."))
    status, asked = agent_on(first, key).request("POST", QUESTIONS, {"text": "Which port do we serve on?"})
    assert (status, asked["status"]) == (201, "open"), asked
    wait_streaming(fake)

    async def over_mcp() -> dict:  # its own event loop, in the waiting thread
        async with mcp_session(second, key) as session:
            waited = await session.call_tool(
                "get_question", {"project": "DEMO", "id": asked["id"], "wait_seconds": 60}
            )
        assert not waited.is_error, waited
        return body(waited)

    over_rest: dict[str, tuple[int, dict]] = {}
    over_mcp_: dict[str, dict] = {}
    waiters = [
        threading.Thread(
            target=lambda: over_rest.setdefault(
                "it", agent_on(second, key).request("GET", f"{QUESTIONS}{asked['id']}/?wait=60")
            )
        ),
        threading.Thread(target=lambda: over_mcp_.setdefault("it", asyncio.run(over_mcp()))),
    ]
    for waiter in waiters:
        waiter.start()
    time.sleep(1)  # both agents wait on the second process
    still = agent_on(second, key).request("GET", f"{QUESTIONS}{asked['id']}/")
    release.set()
    for waiter in waiters:
        waiter.join(90)

    assert still[1]["status"] == "open"  # the answer came after the waits began
    status, rest = over_rest["it"]
    assert status == 200, rest
    assert (rest["status"], rest["answer"]) == ("answered", "8000, as make run says.")
    assert (over_mcp_["it"]["status"], over_mcp_["it"]["answer"]) == ("answered", "8000, as make run says.")


def test_questions_of_a_process_killed_mid_turn_get_outcomes(fake, processes):
    """The first question's turn hangs when its process is killed: the agent waiting on the other
    process hears it needs a human. The second, held back by the running-turn limits, is started
    by the worker once the sweep has freed the turn: nobody else is left to start it."""
    first, second, _ = processes
    key = agent_key(first)
    agent = agent_on(first, key)
    fake.enqueue(HangReply(after_deltas=1, reply=TextReply("Looking into it", chunks=3)))
    status, hanging = agent.request("POST", QUESTIONS, {"text": "Which port do we serve on?"})
    assert status == 201, hanging
    wait_streaming(fake)
    status, held = agent.request("POST", QUESTIONS, {"text": "Which branch do we deploy from?"})
    assert (status, held["status"]) == (201, "open")
    fake.enqueue(
        ToolUseReply([ToolCallSpec("answer_question", {"answer": "main, always."})]), TextReply("Answered.")
    )
    on_second = agent_on(second, key)
    heard: dict[str, tuple[int, dict]] = {}
    waiter = threading.Thread(
        target=lambda: heard.setdefault(
            "it", on_second.request("GET", f"{QUESTIONS}{hanging['id']}/?wait=60")
        )
    )
    waiter.start()
    time.sleep(0.5)  # the agent waits on the other process

    first.kill()
    waiter.join(90)
    deadline = time.monotonic() + 60
    question: dict = {}
    while time.monotonic() < deadline:
        _, question = on_second.request("GET", f"{QUESTIONS}{held['id']}/")  # no wait: it starts nothing
        if question["status"] != "open":
            break
        time.sleep(1)

    status, recovered = heard["it"]
    assert status == 200, recovered
    assert recovered["status"] == "needs_human"
    assert "the turn was recovered" in recovered["reason"]
    assert (question["status"], question["answer"]) == ("answered", "main, always.")


def test_a_question_about_a_ticket_behind_a_full_project_starts_and_the_wait_on_the_other_process_hears_it(
    fake, one_turn_a_project
):
    """The project's one turn is taken by a question's sub-chat; a second question, about a ticket,
    waits unstarted; its asker waits on the other daphne. The first turn ends: the second's
    sub-chat starts (its item read on the database threads, not on the event loop) and answers
    during the wait, which answers 200 with the answer."""
    first, second, worker = one_turn_a_project
    key = agent_key(first)
    agent = agent_on(first, key)
    release = threading.Event()
    fake.enqueue(HangReply(release=release, reply=TextReply("I cannot tell from the plan.")))
    status, holding = agent.request("POST", QUESTIONS, {"text": "Which port do we serve on?"})
    assert status == 201, holding
    wait_streaming(fake)
    status, held = agent.request(
        "POST", QUESTIONS, {"text": "Which format does the export write?", "item": "DEMO-15"}
    )
    fake.enqueue(
        ToolUseReply([ToolCallSpec("answer_question", {"answer": "CSV, one row a ticket."})]),
        TextReply("Answered."),
    )
    on_second = agent_on(second, key)
    heard: dict[str, tuple[int, dict]] = {}
    waiter = threading.Thread(
        target=lambda: heard.setdefault("it", on_second.request("GET", f"{QUESTIONS}{held['id']}/?wait=60"))
    )
    waiter.start()
    time.sleep(1.0)  # the agent waits on the other process; the worker's pass comes meanwhile
    release.set()
    waiter.join(90)
    logs = first.log_tail(400) + second.log_tail(400) + worker.log.read_text(errors="replace")

    assert (status, held["status"], held["item"]) == (201, "open", "DEMO-15")
    waited, answered = heard["it"]
    assert waited == 200, answered
    assert (answered["status"], answered["answer"], answered["item"]) == (
        "answered",
        "CSV, one row a ticket.",
        "DEMO-15",
    )
    assert "SynchronousOnlyOperation" not in logs
    assert "ModelCrossingError" not in logs
    assert "failed to start" not in logs
