"""Committed means answered over MCP (docs/operations.md#a-redis-outage): with Celery's broker out
of reach, claim_ticket, report (progress, done, blocked, failed) and release_claim answer with
their write done once. Before, the search indexing queued on commit raised out of the commit, and
the tool answered ``internal_error`` for a write that had committed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.factories import make_key
from tests.fakes.celery_broker import broker_down
from tests.planner.conftest import sync
from tests.planner.mcp.conftest import connected
from tracker.models import Claim, Item, Report

pytestmark = pytest.mark.django_db(transaction=True)  # the hooks run when a write really commits


def _body(result: Any) -> Any:
    return json.loads(result.content[0].text)


def outcome(result: Any) -> tuple[str, Any]:
    """ok and what the result says it is (a claim's status, a report's kind), or the error's code."""
    body = _body(result)
    if result.is_error:
        return "error", body["error"]["code"]
    return "ok", body.get("status") or body["kind"]


def _written() -> dict[str, list[Any]]:
    return {
        "claims": sorted(Claim.objects.values_list("item__number", "status")),
        "reports": sorted(Report.objects.values_list("item__number", "kind")),
        "tickets": sorted(Item.objects.values_list("number", "state")),
    }


async def test_a_worker_s_writes_over_mcp_answer_with_the_write_while_the_broker_is_down(member, make_item):
    for n in range(4):
        await sync(make_item)(title=f"Ticket {n}", state="ready")
    key = await sync(make_key)(member, "read", "work")
    seen: dict[str, tuple[str, Any]] = {}

    async def claim(item: str) -> int:
        result = await session.call_tool("claim_ticket", {"project": "BAL", "item": item})
        seen[f"claim {item}"] = outcome(result)
        return int(_body(result).get("id", 0))

    async def report(claim_id: int, kind: str) -> None:
        arguments = {"project": "BAL", "claim": claim_id, "kind": kind, "summary": f"A {kind} report"}
        seen[kind] = outcome(await session.call_tool("report", arguments))

    async with connected(key) as session:
        with broker_down():
            first = await claim("BAL-1")
            await report(first, "progress")
            await report(first, "done")
            await report(await claim("BAL-2"), "blocked")
            await report(await claim("BAL-3"), "failed")
            last = await claim("BAL-4")
            released = await session.call_tool("release_claim", {"project": "BAL", "claim": last})
            seen["release"] = outcome(released)

    assert (seen, await sync(_written)()) == (
        {
            "claim BAL-1": ("ok", "active"),
            "progress": ("ok", "progress"),
            "done": ("ok", "done"),
            "claim BAL-2": ("ok", "active"),
            "blocked": ("ok", "blocked"),
            "claim BAL-3": ("ok", "active"),
            "failed": ("ok", "failed"),
            "claim BAL-4": ("ok", "active"),
            "release": ("ok", "released"),
        },
        {
            "claims": [(1, "done"), (2, "blocked"), (3, "failed"), (4, "released")],
            "reports": [(1, "done"), (1, "progress"), (2, "blocked"), (3, "failed")],
            "tickets": [(1, "in_review"), (2, "ready"), (3, "ready"), (4, "ready")],
        },
    )
