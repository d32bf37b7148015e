"""MCP resources and prompts (docs/agents.md#resources-and-prompts) with the SDK's own client: the
reader's runnable tickets and knowledge as ``ballet://`` resources read as their tools read them,
the templates, the two prompts; and refusals a client shows."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from knowledge.services import knowledge_create
from tests.factories import make_key
from tests.planner.conftest import sync
from tests.planner.mcp.conftest import connected
from tracker.services.activity import Actor

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def plan(project, make_item, owner, other_project):
    def build():
        ticket = make_item(title="Export CSV", state="ready", acceptance_criteria=["UTF-8"])
        make_item(title="Someday", state="draft")
        entry = knowledge_create(
            actor=Actor(user=owner), kind="decision", title="CSV is UTF-8", body="Always.", projects=[project]
        )
        theirs = make_item(title="Theirs", state="ready", target=other_project)
        return ticket, entry, theirs

    return build


def body(read: types.ReadResourceResult) -> Any:
    contents = read.contents[0]
    assert isinstance(contents, types.TextResourceContents)
    return json.loads(contents.text)


def said(message: types.PromptMessage) -> str:
    assert isinstance(message.content, types.TextContent)
    return message.content.text


def embedded(message: types.PromptMessage) -> types.TextResourceContents:
    assert isinstance(message.content, types.EmbeddedResource)
    assert isinstance(message.content.resource, types.TextResourceContents)
    return message.content.resource


async def refused(call) -> MCPError:
    with pytest.raises(MCPError) as error:
        await call
    return error.value


async def test_the_reader_lists_runnable_tickets_and_knowledge_and_reads_them_as_the_tools_do(users, plan):
    ticket, entry, _ = await sync(plan)()
    key = await sync(make_key)(users["member"], "read")

    async with connected(key) as session:
        listed = (await session.list_resources()).resources
        templates = (await session.list_resource_templates()).resource_templates
        item = await session.read_resource(f"ballet://BAL/items/{ticket.key}")
        brief = await session.read_resource(f"ballet://BAL/items/{ticket.key}/brief")
        knowledge = await session.read_resource(f"ballet://BAL/knowledge/{entry.pk}")
        tool = await session.call_tool("get_item", {"project": "BAL", "key": ticket.key})

    assert [(r.uri, r.title) for r in listed] == [
        (f"ballet://BAL/items/{ticket.key}", f"{ticket.key}: Export CSV"),
        (f"ballet://BAL/knowledge/{entry.pk}", "CSV is UTF-8"),
    ]  # the draft is not runnable; the other project is not the member's
    assert [t.uri_template for t in templates] == [
        "ballet://{project}/items/{key}",
        "ballet://{project}/items/{key}/brief",
        "ballet://{project}/knowledge/{id}",
        "ballet://{project}/questions/{id}",
    ]
    assert item.contents[0].mime_type == "application/json"
    assert isinstance(tool.content[0], types.TextContent)
    assert body(item) == json.loads(tool.content[0].text)
    assert body(brief)["ticket"]["acceptance_criteria"] == ["UTF-8"]
    assert body(knowledge)["title"] == "CSV is UTF-8"


async def test_a_resource_out_of_reach_is_an_error_a_client_shows(users, plan):
    _, _, theirs = await sync(plan)()
    key = await sync(make_key)(users["member"], "read")
    ask_only = await sync(make_key)(users["member"], "ask", name="asker")

    async with connected(key) as session:
        other = await refused(session.read_resource(f"ballet://OTH/items/{theirs.key}"))
        unknown = await refused(session.read_resource("ballet://BAL/items/BAL-999"))
        garbage = await refused(session.read_resource("https://example.com/"))
    async with connected(ask_only) as session:
        scope = await refused(session.read_resource("ballet://BAL/items/BAL-1"))
        listing = await refused(session.list_resources())

    assert (other.code, other.message) == (-32602, "Project OTH not found.")
    assert "BAL-999" in unknown.message
    assert garbage.data == {"code": "not_found"}
    assert "lacks the read scope" in scope.message
    assert listing.data == {"code": "missing_scope"}


async def test_work_on_ticket_embeds_the_brief_and_plan_change_names_the_way(users, plan):
    ticket, _, _ = await sync(plan)()
    key = await sync(make_key)(users["member"], "read", "work")

    async with connected(key) as session:
        prompts = (await session.list_prompts()).prompts
        work = await session.get_prompt("work_on_ticket", {"project": "BAL", "item": ticket.key})
        change = await session.get_prompt("plan_change", {"project": "BAL", "text": "Split the export"})
        missing = await refused(session.get_prompt("work_on_ticket", {"project": "BAL"}))
        unknown = await refused(session.get_prompt("drop_tables", {"project": "BAL"}))
        hidden = await refused(session.get_prompt("plan_change", {"project": "OTH", "text": "x"}))

    assert [p.name for p in prompts] == ["work_on_ticket", "plan_change"]
    steps, brief = work.messages
    assert f'claim_ticket {{"project": "BAL", "item": "{ticket.key}"}}' in said(steps)
    assert embedded(brief).uri == f"ballet://BAL/items/{ticket.key}/brief"
    assert json.loads(embedded(brief).text)["ticket"]["key"] == ticket.key
    assert "propose_changeset" in said(change.messages[0])
    assert "Split the export" in said(change.messages[0])
    assert missing.message == "item: required, 1 to 30 characters."
    assert unknown.data == {"code": "not_found"}
    assert hidden.message == "Project OTH not found."


async def test_an_unknown_prompt_is_named_unknown_whatever_its_arguments(users):
    """The name is checked before the arguments: a client asking for a prompt Ballet does not have
    (such as the conformance suite's ``test_simple_prompt``) is told so, not that ``project`` is missing."""
    key = await sync(make_key)(users["member"], "read")

    async with connected(key) as session:
        bare = await refused(session.get_prompt("test_simple_prompt"))
        other = await refused(session.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"}))

    assert bare.code == other.code == types.INVALID_PARAMS
    assert bare.message == "Unknown prompt 'test_simple_prompt': see prompts/list."
    assert other.data == {"code": "not_found"}
