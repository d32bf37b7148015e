"""A key bound to projects calls MCP tools only there: another project reads as unknown."""

from __future__ import annotations

import pytest

from tests.factories import make_membership
from tests.planner.conftest import sync
from tests.planner.mcp.conftest import connected
from tests.planner.mcp.test_keys import output
from tracker.models import Role
from tracker.services.keys import key_create

pytestmark = pytest.mark.django_db(transaction=True)


def _bound_key(user, project) -> str:
    return key_create(user=user, name="BAL only", scopes=["read"], projects=[project])[1]


async def test_a_bound_key_reads_its_project_and_no_other(users, project, other_project, make_item):
    await sync(make_item)(title="Export CSV", state="ready")
    await sync(make_membership)(project=other_project, user=users["member"], role=Role.MEMBER)
    key = await sync(_bound_key)(users["member"], project)

    async with connected(key) as session:
        here = await session.call_tool("list_runnable", {"project": "BAL"})
        there = await session.call_tool("list_runnable", {"project": "OTH"})

    assert not here.is_error
    assert [t["title"] for t in output(here)["results"]] == ["Export CSV"]
    assert there.is_error
    assert output(there)["error"]["message"] == "Project OTH not found."
