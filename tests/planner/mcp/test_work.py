"""A worker's day over MCP with the SDK's own client: claim a runnable ticket, read its brief,
report progress and done; and every refusal as a tool error that says why (another worker holds
it, the caller is not the holder, the key lacks the work scope, the input is bad)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import make_key
from tests.planner.conftest import sync
from tests.planner.mcp.conftest import connected
from tracker.models import Claim, ClaimStatus, Item
from tracker.services.activity import Actor
from tracker.services.items import dependency_add

pytestmark = pytest.mark.django_db(transaction=True)


def output(result) -> dict:
    return json.loads(result.content[0].text)


def _state(key: str) -> str:
    return Item.objects.get(project__key="BAL", number=int(key.split("-")[1])).state


@pytest.fixture
def tickets(make_item, owner):
    """BAL-1 runnable, BAL-2 blocked by BAL-1."""

    def build():
        first = make_item(title="Export CSV", state="ready", acceptance_criteria=["UTF-8"])
        second = make_item(title="Email the export", state="ready")
        dependency_add(actor=Actor(user=owner), blocker=first, blocked=second)
        return first, second

    return build


async def test_a_worker_claims_reads_the_brief_and_reports_over_mcp(users, tickets):
    await sync(tickets)()
    key = await sync(make_key)(users["member"], "read", "work")

    async with connected(key) as session:
        runnable = output(await session.call_tool("list_runnable", {"project": "BAL"}))
        claimed = output(await session.call_tool("claim_ticket", {"project": "BAL", "item": "BAL-1"}))
        brief = output(await session.call_tool("get_brief", {"project": "BAL", "item": "BAL-1"}))
        after = output(await session.call_tool("list_runnable", {"project": "BAL"}))
        progress = output(
            await session.call_tool(
                "report",
                {"project": "BAL", "claim": claimed["id"], "kind": "progress", "summary": "Half the columns"},
            )
        )
        done = output(
            await session.call_tool(
                "report",
                {
                    "project": "BAL",
                    "claim": claimed["id"],
                    "kind": "done",
                    "summary": "All **columns**",
                    "links": ["https://git.example.com/pr/1"],
                },
            )
        )
        item = output(await session.call_tool("get_brief", {"project": "BAL", "item": "BAL-1"}))

    assert [t["key"] for t in runnable["results"]] == ["BAL-1"]
    assert (claimed["item"], claimed["holder"], claimed["status"]) == ("BAL-1", "member", "active")
    assert brief["ticket"]["acceptance_criteria"] == ["UTF-8"]
    assert brief["claim"]["id"] == claimed["id"]
    assert brief["blocks"] == [
        {"key": "BAL-2", "kind": "ticket", "title": "Email the export", "state": "ready"}
    ]
    assert after["results"] == []  # claimed: in progress, runnable for nobody else
    assert (progress["kind"], progress["claim_status"]) == ("progress", "active")
    assert (done["kind"], done["claim_status"], done["item_state"]) == ("done", "done", "in_review")
    assert done["summary"] == "All **columns**"
    assert item["ticket"]["state"] == "in_review"
    assert [r["kind"] for r in item["reports"]] == ["done", "progress"]
    assert item["claim"] is None
    assert await sync(_state)("BAL-1") == "in_review"


async def test_a_second_worker_is_told_who_holds_the_ticket(users, tickets):
    await sync(tickets)()
    first = await sync(make_key)(users["member"], "work", name="first")
    second = await sync(make_key)(users["maintainer"], "work", name="second")

    async with connected(first) as session:
        claimed = await session.call_tool("claim_ticket", {"project": "BAL", "item": "BAL-1"})
    async with connected(second) as session:
        refused = await session.call_tool("claim_ticket", {"project": "BAL", "item": "BAL-1"})
        report = await session.call_tool(
            "report", {"project": "BAL", "claim": output(claimed)["id"], "kind": "done", "summary": "Mine"}
        )
        release = await session.call_tool("release_claim", {"project": "BAL", "claim": output(claimed)["id"]})

    assert not claimed.is_error
    assert refused.is_error
    assert output(refused)["error"]["code"] == "conflict"
    assert "member" in output(refused)["error"]["message"]
    assert report.is_error
    assert output(report)["error"]["code"] == "permission_denied"
    # Even with tracker.write, another worker's key does not let a claim go: a human does, in Ballet.
    assert release.is_error
    assert output(release)["error"]["code"] == "permission_denied"
    assert await sync(lambda: Claim.objects.get(status=ClaimStatus.ACTIVE).holder.username)() == "member"


async def test_a_worker_takes_over_a_ticket_whose_lease_ran_out_before_any_sweep(users, tickets):
    await sync(tickets)()
    first = await sync(make_key)(users["member"], "read", "work", name="first")
    second = await sync(make_key)(users["maintainer"], "read", "work", name="second")
    async with connected(first) as session:
        claimed = output(await session.call_tool("claim_ticket", {"project": "BAL", "item": "BAL-1"}))
    past = timezone.now() - timedelta(minutes=1)
    await sync(Claim.objects.filter(pk=claimed["id"]).update)(expires_at=past)

    async with connected(second) as session:
        runnable = output(await session.call_tool("list_runnable", {"project": "BAL"}))
        brief = output(await session.call_tool("get_brief", {"project": "BAL", "item": "BAL-1"}))
        taken = output(await session.call_tool("claim_ticket", {"project": "BAL", "item": "BAL-1"}))
    async with connected(first) as session:
        late = output(
            await session.call_tool(
                "report", {"project": "BAL", "claim": claimed["id"], "kind": "done", "summary": "Late"}
            )
        )

    assert [t["key"] for t in runnable["results"]] == ["BAL-1"]
    assert brief["claim"] is None
    assert (taken["holder"], taken["status"]) == ("maintainer", "active")
    assert late["error"]["code"] == "invalid_state"
    assert f"Claim {claimed['id']} on BAL-1 has ended (expired: the lease ran out" in late["error"]["message"]


async def test_the_holder_releases_and_the_ticket_is_ready_again(users, tickets):
    await sync(tickets)()
    key = await sync(make_key)(users["member"], "work")

    async with connected(key) as session:
        claimed = output(await session.call_tool("claim_ticket", {"project": "BAL", "item": "BAL-1"}))
        released = output(
            await session.call_tool(
                "release_claim", {"project": "BAL", "claim": claimed["id"], "reason": "Sick"}
            )
        )
        again = await session.call_tool(
            "report", {"project": "BAL", "claim": claimed["id"], "kind": "progress", "summary": "Back"}
        )

    assert released["status"] == "released"
    assert "Sick" in released["end_reason"]
    assert await sync(_state)("BAL-1") == "ready"
    assert again.is_error
    assert output(again)["error"]["code"] in {"conflict", "invalid_state"}


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("claim_ticket", {"project": "BAL", "item": "BAL-2"}, "BAL-1"),  # blocked: names its blocker
        ("claim_ticket", {"project": "BAL", "item": "BAL-99"}, "not found"),
        ("claim_ticket", {"project": "NOPE", "item": "NOPE-1"}, "Project NOPE not found."),
        ("get_brief", {"project": "BAL", "item": "BAL-99"}, "not found"),
        ("report", {"project": "BAL", "claim": 999999, "kind": "done", "summary": "x"}, "not found"),
        ("report", {"project": "BAL", "claim": 1, "kind": "finished", "summary": "x"}, "kind"),
        ("report", {"project": "BAL", "claim": 1, "kind": "done", "summary": ""}, "summary"),
        ("release_claim", {"project": "BAL"}, "claim"),
    ],
)
async def test_bad_work_calls_are_tool_errors_that_say_why(users, tickets, tool, arguments, message):
    await sync(tickets)()
    key = await sync(make_key)(users["member"], "read", "work")

    async with connected(key) as session:
        result = await session.call_tool(tool, arguments)

    assert result.is_error
    assert message in output(result)["error"]["message"]


async def test_a_read_key_cannot_claim_and_a_viewer_cannot_either(users, tickets):
    await sync(tickets)()
    read_only = await sync(make_key)(users["member"], "read")
    viewer = await sync(make_key)(users["viewer"], "read", "work")

    async with connected(read_only) as session:
        no_scope = await session.call_tool("claim_ticket", {"project": "BAL", "item": "BAL-1"})
        brief = await session.call_tool("get_brief", {"project": "BAL", "item": "BAL-1"})
    async with connected(viewer) as session:
        no_role = await session.call_tool("claim_ticket", {"project": "BAL", "item": "BAL-1"})

    assert output(no_scope)["error"]["code"] == "missing_scope"
    assert not brief.is_error
    assert output(no_role)["error"]["code"] == "permission_denied"
    assert await sync(_state)("BAL-1") == "ready"


async def test_a_worker_retrying_every_call_over_mcp_ends_with_one_claim_and_one_done_report(users, tickets):
    """Each call sent twice, as a client does whose answer was lost."""
    await sync(tickets)()
    key = await sync(make_key)(users["member"], "read", "work")

    async with connected(key) as session:
        claims = [
            output(await session.call_tool("claim_ticket", {"project": "BAL", "item": "BAL-1"}))
            for _ in range(2)
        ]
        done = {
            "project": "BAL",
            "claim": claims[0]["id"],
            "kind": "done",
            "summary": "Shipped.",
            "idempotency_key": "d",
        }
        reports = [await session.call_tool("report", done) for _ in range(2)]
        reused = await session.call_tool("report", {**done, "summary": "Something else."})

    assert claims[1]["id"] == claims[0]["id"]
    assert [r.is_error for r in reports] == [False, False]
    assert output(reports[1]) == output(reports[0])
    assert output(reports[1])["claim_status"] == "done"
    assert reused.is_error
    assert output(reused)["error"]["code"] == "conflict"
    assert await sync(Claim.objects.count)() == 1
    assert await sync(lambda: list(Claim.objects.get().reports.values_list("kind", flat=True)))() == ["done"]
    assert await sync(_state)("BAL-1") == "in_review"
