"""``/mcp`` in this process: token authentication, the request limit, the tools derived from the
planner's, their answers against REST's, and refusals that reveal nothing."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable

import pytest
from mcp.shared.exceptions import MCPError

from planner.domain.tools import TOOLS
from planner.domain.tools.base import ToolContext
from planner.mcp_server.reads import READS
from planner.mcp_server.tools import DEFINITIONS, PLAN_TOOLS, PROJECT_HINT, READ_TOOLS, SPECS
from tests.factories import MembershipFactory
from tests.planner.conftest import sync
from tests.planner.mcp.conftest import ACCEPT, connected, http, rpc, token_of
from tracker.models import Role
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose
from tracker.services.items import dependency_add

pytestmark = pytest.mark.django_db(transaction=True)


def nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def output(result) -> dict:
    """A tool result's JSON body (its text), checked against its structured copy."""
    body = json.loads(result.content[0].text)
    assert result.structured_content == body
    return body


async def refusal(headers: dict[str, str | bytes]) -> tuple[int, dict, dict[str, str]]:
    async with http(headers) as client:
        response = await client.post("/mcp", json=rpc("tools/list"), headers=ACCEPT)
    return response.status_code, response.json(), dict(response.headers)


async def refusals(action: Callable[[], Awaitable[object]]) -> list[str]:
    """The messages of the MCP errors ``action`` raised (the SDK's task groups wrap them in groups)."""
    try:
        await action()
    except Exception as exc:
        found: list[str] = []
        stack: list[BaseException] = [exc]
        while stack:
            error = stack.pop()
            if isinstance(error, MCPError):
                found.append(error.error.message)
            elif isinstance(error, BaseExceptionGroup):
                stack.extend(error.exceptions)
        return found
    raise AssertionError("the client was not refused")


# --- authentication --------------------------------------------------------------------------


async def test_a_request_without_a_token_is_refused_401_with_a_json_error(users):
    status, body, headers = await refusal({})

    assert status == 401
    assert body["error"]["data"]["code"] == "not_authenticated"
    assert "Authorization: Bearer KEY" in body["error"]["message"]
    assert headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    ("authorization", "code"),
    [
        ("Bearer 0123456789abcdef0123456789abcdef01234567", "authentication_failed"),  # no such token
        ("Token nope", "authentication_failed"),
        ("Basic ZGVtbzpkZW1v", "not_authenticated"),
        ("Bearer", "not_authenticated"),
        ("Bearer two words", "not_authenticated"),
        ("Bearer " + "a" * 5000, "not_authenticated"),
        ("Bearer tok\u00e9n".encode("latin-1"), "not_authenticated"),
        ("Bearer tok\u00b2n".encode(), "not_authenticated"),
    ],
)
async def test_a_bad_token_is_refused_401(users, authorization, code):
    status, body, _ = await refusal({"Authorization": authorization})

    assert status == 401
    assert body["error"]["data"]["code"] == code


async def test_the_token_of_an_inactive_user_is_refused_401(users):
    member = users["member"]
    token = await sync(token_of)(member)
    member.is_active = False
    await sync(member.save)()

    status, body, _ = await refusal({"Authorization": f"Bearer {token}"})

    assert status == 401
    assert body["error"]["message"] == "User inactive or deleted."


async def test_the_sdk_client_is_told_why_it_is_refused(users):
    async def connect() -> None:
        async with connected("0123456789abcdef0123456789abcdef01234567"):
            pass

    assert await refusals(connect) == ["Invalid token."]


@pytest.mark.parametrize("scheme", ["Bearer", "Token", "bearer"])
async def test_the_rest_token_authenticates_as_bearer_or_token(users, scheme):
    token = await sync(token_of)(users["viewer"])

    async with connected(token, scheme=scheme) as session:
        listed = await session.list_tools()

    assert [tool.name for tool in listed.tools] == [
        *READ_TOOLS,
        *PLAN_TOOLS,
        "ask_question",
        "get_question",
        "list_questions",
        "withdraw_question",
        "claim_ticket",
        "get_brief",
        "report",
        "release_claim",
        "wait_for_events",
    ]


async def test_a_host_outside_allowed_hosts_is_refused(users):
    token = await sync(token_of)(users["viewer"])

    status, body, _ = await refusal({"Authorization": f"Bearer {token}", "Host": "evil.example"})

    assert status == 400
    assert body["error"]["message"] == "Invalid Host header."


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://testserver.evil.example"])
async def test_a_browser_page_of_another_origin_is_refused_403(users, origin):
    token = await sync(token_of)(users["viewer"])

    status, body, _ = await refusal({"Authorization": f"Bearer {token}", "Origin": origin})

    assert status == 403
    assert body["error"]["data"] == {"code": "bad_origin"}
    assert "[mcp] allowed_origins" in body["error"]["message"]


async def test_the_servers_own_origin_an_allowed_one_and_none_are_served(users, settings):
    settings.BALLET_MCP = dataclasses.replace(settings.BALLET_MCP, allowed_origins=("https://tools.example",))
    token = await sync(token_of)(users["viewer"])

    served = [
        await refusal({"Authorization": f"Bearer {token}", **origin})
        for origin in (
            {"Origin": "http://testserver"},
            {"Origin": "https://testserver"},  # behind a proxy that ends TLS
            {"Origin": "https://tools.example/"},
            {},
        )
    ]

    assert [status for status, _, _ in served] == [200, 200, 200, 200]
    assert all("tools" in body["result"] for _, body, _ in served)


async def test_an_unknown_tool_is_a_protocol_error_naming_the_tools(users):
    token = await sync(token_of)(users["viewer"])
    headers = {"Authorization": f"Bearer {token}", **ACCEPT}

    async with http(headers) as client:
        response = await client.post("/mcp", json=rpc("tools/call", {"name": "drop_tables", "arguments": {}}))
    async with connected(token) as session:
        messages = await refusals(lambda: session.call_tool("drop_tables", {}))

    error = response.json()["error"]
    assert error["code"] == -32602  # invalid params, as the specification has it
    assert error["data"] == {"code": "unknown_tool"}
    assert "There is no tool named 'drop_tables'; there are list_runnable" in error["message"]
    assert messages == [error["message"]]


# --- the request limit -----------------------------------------------------------------------


async def test_requests_past_the_limit_per_token_get_429(users, limits):
    limits(mcp_requests_per_minute=3)
    viewer_token = await sync(token_of)(users["viewer"])
    member_token = await sync(token_of)(users["member"])

    statuses = [(await refusal({"Authorization": f"Token {viewer_token}"}))[0] for _ in range(3)]
    status, body, _ = await refusal({"Authorization": f"Token {viewer_token}"})
    other, _, _ = await refusal({"Authorization": f"Token {member_token}"})

    assert statuses == [200, 200, 200]
    assert status == 429
    assert body["error"]["data"]["code"] == "rate_limited"
    assert body["error"]["message"].startswith("At most 3 MCP and question requests a minute per token")
    assert other == 200  # counted per token


async def test_the_sdk_client_past_the_limit_reads_the_message(users, limits):
    limits(mcp_requests_per_minute=3)  # initialize, initialized, tools/list
    token = await sync(token_of)(users["viewer"])

    async def use() -> None:
        async with connected(token) as session:
            await session.list_tools()
            await session.call_tool("list_runnable", {"project": "BAL"})

    [message] = await refusals(use)
    assert message.startswith("At most 3 MCP and question requests a minute per token")


# --- the tools -------------------------------------------------------------------------------


async def test_each_tool_is_the_planners_with_a_required_project(users):
    token = await sync(token_of)(users["viewer"])

    async with connected(token) as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}

    assert [tool.name for tool in DEFINITIONS] == list(listed) == list(SPECS)
    for name in READ_TOOLS:  # the planner's own name, input and permission; REST's read (one shape)
        assert (SPECS[name].name, SPECS[name].permission) == (name, TOOLS[name].permission)
        assert set(SPECS[name].input_schema["properties"]) >= set(TOOLS[name].input_schema["properties"])
        assert SPECS[name].handler is (READS[name].handler if name in READS else TOOLS[name].handler)
    for name, spec in SPECS.items():
        schema = listed[name].input_schema
        assert listed[name].description == spec.description
        assert schema["properties"].pop("project")["type"] == "string"
        assert schema["required"][0] == "project"
        assert {**schema, "required": schema["required"][1:]} == {
            **spec.input_schema,
            "required": spec.input_schema.get("required", []),
        }
        assert "project" not in spec.input_schema["properties"]  # derived, the planner's untouched


@pytest.fixture
def plan(project, make_item, owner):
    """Tickets in several states; a ready one blocked, another whose blocker is done."""
    done = make_item(title="Done work", state="done")
    waiting = make_item(title="Login form", state="draft")
    blocked = make_item(title="Blocked ticket", state="ready")
    free = make_item(title="Free ticket", state="ready")
    after_done = make_item(title="After the done one", state="ready")
    make_item(kind="epic", title="An epic")
    actor = Actor(user=owner)
    dependency_add(actor=actor, blocker=waiting, blocked=blocked)
    dependency_add(actor=actor, blocker=done, blocked=after_done)
    return {"free": free, "after_done": after_done}


@pytest.mark.parametrize("discover", [False, True], ids=["2025 handshake", "2026 discover"])
async def test_list_runnable_answers_what_rest_lists(users, plan, client_for, discover):
    viewer = users["viewer"]
    rest = (await sync(client_for(viewer).get)("/api/v1/projects/BAL/runnable/")).json()["results"]
    token = await sync(token_of)(viewer)

    async with connected(token, discover=discover) as session:
        result = await session.call_tool("list_runnable", {"project": "BAL"})

    assert not result.is_error
    assert output(result)["results"] == rest
    assert [t["key"] for t in rest] == ["BAL-4", "BAL-5"]


async def test_get_item_and_list_items_read_as_rest_does(users, plan):
    token = await sync(token_of)(users["viewer"])

    async with connected(token) as session:
        item = output(await session.call_tool("get_item", {"project": "BAL", "key": "BAL-5"}))
        listed = output(await session.call_tool("list_items", {"project": "BAL", "kind": "epic"}))

    assert item["title"] == "After the done one"
    assert [blocker["key"] for blocker in item["dependencies"]["blockers"]] == ["BAL-1"]
    assert [row["title"] for row in listed["results"]] == ["An epic"]


# --- refusals --------------------------------------------------------------------------------


async def test_a_project_the_user_cannot_read_is_refused_as_one_that_does_not_exist(users, other_project):
    token = await sync(token_of)(users["member"])

    async with connected(token) as session:
        hidden = await session.call_tool("list_runnable", {"project": "OTH"})
        unknown = await session.call_tool("list_runnable", {"project": "ZZZ"})

    assert hidden.is_error
    assert unknown.is_error
    assert output(hidden) == {"error": {"code": "not_found", "message": "Project OTH not found."}}
    assert output(unknown) == {"error": {"code": "not_found", "message": "Project ZZZ not found."}}


async def test_a_stranger_learns_nothing_of_the_project(users):
    token = await sync(token_of)(users["stranger"])

    async with connected(token) as session:
        result = await session.call_tool("get_item", {"project": "BAL", "key": "BAL-1"})

    assert output(result) == {"error": {"code": "not_found", "message": "Project BAL not found."}}


async def test_a_removed_member_is_refused_at_the_next_call(users, project):
    member = users["member"]
    token = await sync(token_of)(member)

    async with connected(token) as session:
        before = await session.call_tool("list_runnable", {"project": "BAL"})
        await sync(lambda: project.memberships.filter(user=member).delete())()
        after = await session.call_tool("list_runnable", {"project": "BAL"})

    assert not before.is_error
    assert output(after)["error"]["message"] == "Project BAL not found."


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("list_runnable", {}, f"project: required: {PROJECT_HINT}."),
        ("list_runnable", {"project": 7}, f"project: required: {PROJECT_HINT}."),
        ("list_runnable", {"project": "B" * 11}, "project: at most 10 characters"),
        ("list_runnable", {"project": "BAL", "limit": 0}, "limit: 0 is less than the minimum of 1"),
        ("list_runnable", {"project": "BAL", "extra": 1}, "Additional properties are not allowed"),
        ("get_item", {"project": "BAL"}, "'key' is a required property"),
        ("get_item", {"project": "BAL", "key": "BAL-\u00b2"}, "key: 'BAL-²' does not match"),
        ("get_item", {"project": "BAL", "key": "BAL-99"}, "Item BAL-99 not found in project BAL."),
        ("get_item", {"project": "BAL", "key": "BAL-1\u0000"}, "NUL"),
        ("list_runnable", {"project": "BA\u0000L"}, "Project not found."),
        ("search_project", {"project": "BAL", "query": "x" * 501}, "is too long"),
        ("get_knowledge", {"project": "BAL", "id": 12345}, "not found"),
        ("list_items", {"project": "BAL", "offset": nested(30)}, "offset"),
    ],
)
async def test_bad_input_is_a_readable_tool_error(users, plan, name, arguments, message):
    token = await sync(token_of)(users["viewer"])

    async with connected(token) as session:
        result = await session.call_tool(name, arguments)

    assert result.is_error
    assert message in output(result)["error"]["message"]


async def test_a_body_that_is_no_json_rpc_gets_an_error_not_a_crash(users):
    token = await sync(token_of)(users["viewer"])
    headers = {"Authorization": f"Bearer {token}", **ACCEPT, "content-type": "application/json"}

    async with http(headers) as client:
        garbage = await client.post("/mcp", content=b"{not json")
        deep = await client.post("/mcp", content=b"[" * 100_000 + b"]" * 100_000)
        read = await client.get("/mcp")
        delete = await client.delete("/mcp")

    assert garbage.status_code == 400
    assert garbage.json()["error"]["code"] == -32700  # parse error
    assert deep.status_code == 400
    assert [read.status_code, delete.status_code] == [405, 405]
    assert read.json()["error"]["message"] == "Send JSON-RPC requests with POST."


# --- outside a planner session ---------------------------------------------------------------


def test_a_tool_context_without_a_session_acts_as_the_user(project, owner):
    operations = [{"op": "create", "kind": "ticket", "fields": {"title": "Proposed over REST"}}]
    changeset_propose(actor=Actor(user=owner), project=project, title="From REST", operations=operations)
    context = ToolContext(user=owner, project=project)

    listed = TOOLS["list_changesets"].handler(context, {})

    assert context.actor.label == "user:owner"
    assert [c["by_this_session"] for c in listed["changesets"]] == [False]


async def test_a_viewer_of_two_projects_reads_each_by_its_key(users, other_project):
    viewer = users["viewer"]
    await sync(MembershipFactory)(project=other_project, user=viewer, role=Role.VIEWER)
    token = await sync(token_of)(viewer)

    async with connected(token) as session:
        results = [await session.call_tool("list_items", {"project": key}) for key in ("BAL", "OTH")]

    assert [result.is_error for result in results] == [False, False]


async def test_a_tool_that_fails_unexpectedly_is_an_internal_error_result(users, monkeypatch, caplog):
    async def broken(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("planner.mcp_server.app.tool_call", broken)
    token = await sync(token_of)(users["viewer"])

    async with connected(token) as session:
        result = await session.call_tool("list_runnable", {"project": "BAL"})

    assert result.is_error
    assert output(result)["error"] == {
        "code": "internal_error",
        "message": "The tool list_runnable failed unexpectedly; the error was logged.",
    }
    assert "boom" not in json.dumps(output(result))
    assert "MCP tool list_runnable failed" in caplog.text
