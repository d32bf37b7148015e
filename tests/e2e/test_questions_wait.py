"""An agent's wait for the planner's answer against a real daphne, the answer arriving *during*
the wait, as a coding agent meets it: over REST and MCP, about an item, and for the demo's
seeded question answered by ``demo`` while the agent waits."""

from __future__ import annotations

import threading
import time

import pytest

from tests.e2e.conftest import Script
from tests.e2e.test_mcp import body, mcp_session
from tests.fakes.client import Client
from tests.fakes.messages_api import HangReply, TextReply, ToolCallSpec, ToolUseReply
from tests.fakes.servers import PASSWORD, Server

pytestmark = pytest.mark.e2e

SLOW = 0.25  # seconds between the model's deltas: the answer comes well after the wait began


def slow_answer(answer: str) -> ToolUseReply:
    return ToolUseReply(
        [ToolCallSpec("answer_question", {"answer": answer})],
        text_before="Let me look that up.",
        text_chunks=6,
        delay_between_deltas=SLOW,
    )


def token_client(server: Server, token: str) -> Client:
    """A REST client with a known token (the agent has no password)."""
    client = Client.__new__(Client)
    client.base_url, client.token = server.url, token
    return client


def test_rest_wait_returns_the_answer_that_arrives_during_it(server: Server, script: Script, agent_token):
    release = threading.Event()  # the model answers once the agent waits
    answer = ToolUseReply([ToolCallSpec("answer_question", {"answer": "8000, as make run says."})])
    script.on("Which port", HangReply(reply=answer, release=release), TextReply("Answered."))
    agent = token_client(server, agent_token)
    question = {"text": "Which port do we serve on?", "item": "DEMO-15"}

    status, asked = agent.request("POST", "/api/v1/projects/DEMO/questions/", question)
    waited: dict[str, tuple[int, dict]] = {}
    waiter = threading.Thread(
        target=lambda: waited.setdefault(
            "it", agent.request("GET", f"/api/v1/projects/DEMO/questions/{asked['id']}/?wait=20")
        )
    )
    waiter.start()
    time.sleep(0.5)  # the agent waits
    _, still = agent.request("GET", f"/api/v1/projects/DEMO/questions/{asked['id']}/")
    release.set()
    waiter.join(30)

    assert (status, asked["status"], still["status"]) == (201, "open", "open")
    waited_status, answered = waited["it"]
    assert waited_status == 200, answered
    assert (answered["status"], answered["answer"], answered["item"]) == (
        "answered",
        "8000, as make run says.",
        "DEMO-15",
    )


async def test_mcp_wait_returns_the_answer_that_arrives_during_it(
    server: Server, script: Script, agent_token
):
    script.on("Which branch", slow_answer("main, always."), TextReply("Answered."))
    question = {"project": "DEMO", "text": "Which branch?", "item": "DEMO-15", "wait_seconds": 0}

    async with mcp_session(server, agent_token) as session:
        asked = body(await session.call_tool("ask_question", question))
        waited = await session.call_tool(
            "get_question", {"project": "DEMO", "id": asked["id"], "wait_seconds": 20}
        )

    assert asked["status"] == "open"
    assert not waited.is_error, waited
    assert (body(waited)["status"], body(waited)["answer"]) == ("answered", "main, always.")


def test_the_seeded_question_answered_by_demo_during_the_agents_wait(
    server: Server, script: Script, agent_token
):
    # The seeded sub-chat is paused on ask_human: the model's next call follows demo's answer.
    script.on("weekly CSV export", TextReply("unused"), slow_answer("Leave them out."), TextReply("Done."))
    agent = token_client(server, agent_token)
    demo = Client(server.url, "demo", PASSWORD)
    waited: dict[str, tuple[int, dict]] = {}
    waiter = threading.Thread(
        target=lambda: waited.setdefault(
            "it", agent.request("GET", "/api/v1/projects/DEMO/questions/1/?wait=20")
        )
    )
    waiter.start()
    time.sleep(0.5)  # the agent waits

    sub = demo.get("/api/v1/projects/DEMO/questions/1/")["session"]
    (pending,) = demo.transcript(sub)["requests"]
    answered, _ = demo.request(
        "POST",
        f"/api/v1/planner/sessions/{sub}/answers/",
        {"request": pending["id"], "text": "Leave them out"},
    )
    waiter.join(30)

    assert answered == 200
    status, question = waited["it"]
    assert status == 200, question
    assert (question["status"], question["answer"], question["item"]) == (
        "answered",
        "Leave them out.",
        "DEMO-15",
    )
