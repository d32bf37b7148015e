"""An MCP client (the SDK's own, over Streamable HTTP) against a real daphne on the fake model:
it lists the tools, reads the runnable tickets as REST lists them, is refused a project it
cannot read exactly as one that does not exist, and asks a question that the planner (the fake
model calling ``answer_question``) answers within the wait."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.conftest import Script, shell
from tests.fakes.client import Client
from tests.fakes.messages_api import TextReply, ToolCallSpec, ToolUseReply
from tests.fakes.servers import PASSWORD, Server

pytestmark = pytest.mark.e2e

TOOLS = [
    *("list_runnable", "get_item", "list_items"),
    *("search_project", "search_knowledge", "get_knowledge"),
    *("repo_tree", "repo_read", "repo_search", "repo_log"),
    *("list_changesets", "propose_changeset", "create_knowledge", "update_knowledge"),
    *("ask_question", "get_question", "list_questions", "withdraw_question"),
    *("claim_ticket", "get_brief", "report", "release_claim"),
    "wait_for_events",
]


@asynccontextmanager
async def mcp_session(server: Server, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=90) as http,
        streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def body(result) -> dict:
    return json.loads(result.content[0].text)


@pytest.fixture(scope="module")
def demo(server: Server) -> Client:
    return Client(server.url, "demo", PASSWORD)


@pytest.fixture(scope="module")
def outsider_token(server: Server) -> str:
    """The REST token of a user who belongs to no project."""
    return shell(
        server,
        "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token; "
        "user = User.objects.create_user('outsider', password='outsider-password-1'); "
        "print(Token.objects.create(user=user).key)",
    )


async def test_an_agent_reads_the_plan_over_mcp(server, demo):
    runnable = demo.get("/api/v1/projects/DEMO/runnable/")["results"]

    async with mcp_session(server, demo.token) as session:
        tools = [tool.name for tool in (await session.list_tools()).tools]
        result = await session.call_tool("list_runnable", {"project": "DEMO"})
        first = await session.call_tool("get_item", {"project": "DEMO", "key": runnable[0]["key"]})

    assert tools == TOOLS
    assert not result.is_error
    assert [t["key"] for t in body(result)["results"]] == [t["key"] for t in runnable]
    assert [t["key"] for t in runnable] == ["DEMO-9", "DEMO-15", "DEMO-16"]
    assert body(first)["title"] == runnable[0]["title"]


async def test_a_project_the_agent_cannot_read_is_refused_as_unknown(server, outsider_token):
    async with mcp_session(server, outsider_token) as session:
        hidden = await session.call_tool("list_runnable", {"project": "DEMO"})
        unknown = await session.call_tool("list_runnable", {"project": "NOPE"})

    assert hidden.is_error
    assert unknown.is_error
    assert body(hidden) == {"error": {"code": "not_found", "message": "Project DEMO not found."}}
    assert body(unknown) == {"error": {"code": "not_found", "message": "Project NOPE not found."}}


async def test_a_request_without_the_token_is_refused_401(server):
    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.post(
            f"{server.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            headers={"accept": "application/json, text/event-stream"},
        )

    assert response.status_code == 401
    assert response.json()["error"]["data"]["code"] == "not_authenticated"


async def test_an_agent_asks_and_the_planner_answers_within_the_wait(
    server, script: Script, agent_token, demo
):
    script.on(
        "Which delimiter",
        ToolUseReply([ToolCallSpec("answer_question", {"answer": "Semicolons: the front desk uses Excel."})]),
        TextReply("Answered the agent."),
    )
    question = {"project": "DEMO", "text": "Which delimiter should the CSV use?", "item": "DEMO-15"}

    async with mcp_session(server, agent_token) as session:
        asked = await session.call_tool("ask_question", {**question, "wait_seconds": 30})
        answer = body(asked)
        read = body(await session.call_tool("get_question", {"project": "DEMO", "id": answer["id"]}))

    assert not asked.is_error
    assert (answer["status"], answer["answer"]) == ("answered", "Semicolons: the front desk uses Excel.")
    assert (answer["asker"], answer["item"]) == ("agent", "DEMO-15")
    assert answer["answered_by"] == f"planner:{answer['session']}"
    assert read["answer"] == answer["answer"]
    over_rest = demo.get(f"/api/v1/projects/DEMO/questions/{answer['id']}/")
    assert (over_rest["status"], over_rest["answer"]) == ("answered", answer["answer"])


async def test_a_viewer_is_refused_a_question(server):
    viewer = Client(server.url, "viewer", PASSWORD)

    async with mcp_session(server, viewer.token) as session:
        refused = await session.call_tool("ask_question", {"project": "DEMO", "text": "May I ask?"})

    assert refused.is_error
    assert body(refused)["error"]["message"] == "You need planner.chat in DEMO to do this."
