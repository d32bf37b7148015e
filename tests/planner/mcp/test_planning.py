"""Planning over MCP within the key's scopes (docs/agents.md#tools): a plan-scoped key proposes a
changeset with the planner's own tool, which waits for a human as any other and is applied by
one; it writes knowledge; a key without the plan scope, or a viewer's, is refused readably and
nothing is stored."""

from __future__ import annotations

import json

import pytest

from knowledge.models import KnowledgeEntry
from tests.factories import make_key
from tests.planner.api_client import client_for
from tests.planner.conftest import sync
from tests.planner.mcp.conftest import connected
from tracker.models import Changeset, Item

pytestmark = pytest.mark.django_db(transaction=True)

CHANGESET = {
    "project": "BAL",
    "title": "Split the export",
    "rationale": "Two tickets are easier to review.",
    "operations": [{"op": "create", "kind": "ticket", "fields": {"title": "Export bookings as CSV"}}],
}


def output(result) -> dict:
    return json.loads(result.content[0].text)


async def test_a_plan_key_proposes_a_changeset_that_a_human_applies(users):
    key = await sync(make_key)(users["member"], "read", "plan")

    async with connected(key) as session:
        proposed = await session.call_tool("propose_changeset", CHANGESET)
        listed = output(await session.call_tool("list_changesets", {"project": "BAL"}))

    assert not proposed.is_error, proposed
    number = output(proposed)["changeset"]["number"]
    assert output(proposed)["changeset"]["status"] == "proposed"
    assert f'"number": {number}' in json.dumps(listed)
    assert not await sync(
        Item.objects.filter(title="Export bookings as CSV").exists
    )()  # nothing until applied
    changeset = await sync(Changeset.objects.select_related("proposed_by").get)(number=number)
    assert changeset.proposed_by == users["member"]
    applied = await (await client_for(users["owner"])).post(
        f"/api/v1/projects/BAL/changesets/{number}/apply/"
    )
    assert applied.status_code == 200, applied.content
    assert await sync(Item.objects.filter(title="Export bookings as CSV").exists)()


async def test_a_plan_key_writes_and_updates_knowledge(users):
    key = await sync(make_key)(users["member"], "read", "plan")

    async with connected(key) as session:
        created = output(
            await session.call_tool(
                "create_knowledge",
                {"project": "BAL", "kind": "note", "title": "Export format", "body": "CSV, UTF-8."},
            )
        )
        entry_id = created.get("id") or created["entry"]["id"]
        updated = await session.call_tool(
            "update_knowledge",
            {"project": "BAL", "id": entry_id, "version": 1, "body": "CSV, UTF-8, with a header row."},
        )

    assert not updated.is_error, updated
    entry = await sync(KnowledgeEntry.objects.get)(pk=entry_id)
    assert (entry.title, entry.body) == ("Export format", "CSV, UTF-8, with a header row.")


async def test_without_the_plan_scope_or_the_role_planning_is_refused_and_nothing_stored(users):
    read_only = await sync(make_key)(users["member"], "read", "work", name="reader")
    viewer = await sync(make_key)(users["viewer"], "read", "plan", name="viewer")

    async with connected(read_only) as session:
        scoped = await session.call_tool("propose_changeset", CHANGESET)
        knowledge = await session.call_tool(
            "create_knowledge", {"project": "BAL", "kind": "note", "title": "T", "body": "B"}
        )
        listed = await session.call_tool("list_changesets", {"project": "BAL"})
    async with connected(viewer) as session:
        role = await session.call_tool("propose_changeset", CHANGESET)

    assert scoped.is_error
    assert output(scoped)["error"]["code"] == "missing_scope"
    assert "lacks the plan scope" in output(scoped)["error"]["message"]
    assert knowledge.is_error
    assert not listed.is_error  # reading changesets needs only read
    assert role.is_error
    assert output(role)["error"]["code"] == "permission_denied"
    assert await sync(Changeset.objects.count)() == 0
    assert await sync(KnowledgeEntry.objects.count)() == 0


async def test_a_bad_changeset_is_a_readable_tool_error_and_stores_nothing(users):
    key = await sync(make_key)(users["member"], "read", "plan")
    update = {"op": "update", "item": "BAL-999", "base_version": 1, "fields": {"state": "done"}}
    bad = {**CHANGESET, "operations": [update]}

    async with connected(key) as session:
        refused = await session.call_tool("propose_changeset", bad)
        empty = await session.call_tool("propose_changeset", {**CHANGESET, "operations": []})

    assert refused.is_error
    assert "BAL-999" in json.dumps(output(refused)["error"]), output(refused)
    assert empty.is_error
    assert await sync(Changeset.objects.count)() == 0
