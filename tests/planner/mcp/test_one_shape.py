"""One shape (docs/agents.md#one-shape): every read an agent makes answers the same object over
REST and over MCP, and lists page the same way, by limit and offset; REST's envelope adds only its
links. The walk below asks each read both ways, with the same key, and compares."""

from __future__ import annotations

import json
from typing import Any

import pytest

from knowledge.services import knowledge_create
from planner.domain.tools import TOOLS
from planner.mcp_server.tools import SPECS
from planner.models import Question
from tests.factories import make_key
from tests.planner.conftest import sync
from tests.planner.mcp.conftest import connected, http
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose
from tracker.services.items import dependency_add

pytestmark = pytest.mark.django_db(transaction=True)
API = "/api/v1/projects/BAL/"


def seed(project, owner, member, make_item) -> dict[str, int]:
    first = make_item(title="Export CSV", state="ready", acceptance_criteria=["UTF-8"])
    second = make_item(title="Email the export", state="ready")
    make_item(title="Zip the export", state="ready")
    dependency_add(actor=Actor(user=owner), blocker=first, blocked=second)
    entry = knowledge_create(
        actor=Actor(user=owner),
        kind="decision",
        title="CSV is UTF-8",
        body="Always **UTF-8**.",
        projects=[project],
        items=[first],
    )
    mine = Question.objects.create(
        project=project,
        asker=member,
        item=first,
        text="Which encoding?",
        status="answered",
        answer="UTF-8",
        answered_by="user:owner",
    )
    Question.objects.create(project=project, asker=owner, text="Which region?")
    changeset_propose(
        actor=Actor(user=owner),
        project=project,
        title="More",
        operations=[{"op": "create", "ref": "zip", "kind": "ticket", "fields": {"title": "Zip it"}}],
    )
    return {"entry": entry.pk, "question": mine.pk}


def listed(body: dict[str, Any]) -> dict[str, Any]:
    """REST's list envelope less its links, which MCP has no use for."""
    assert {"next", "previous"} <= body.keys()
    return {name: value for name, value in body.items() if name not in ("next", "previous")}


def output_text(result) -> str:
    return str(result.content[0].text)


def output(result) -> Any:
    assert not result.is_error, output_text(result)
    return json.loads(output_text(result))


async def test_every_read_answers_the_same_object_over_rest_and_mcp(project, owner, member, make_item):
    ids = await sync(seed)(project, owner, member, make_item)
    key = await sync(make_key)(member, "read", "work", "ask", "plan")
    reads: list[tuple[str, dict[str, Any], str]] = [
        ("list_runnable", {}, "runnable/"),
        ("list_runnable", {"limit": 1, "offset": 1}, "runnable/?limit=1&offset=1"),
        ("list_items", {}, "items/"),
        ("list_items", {"state": "ready", "limit": 2, "offset": 1}, "items/?state=ready&limit=2&offset=1"),
        ("get_item", {"key": "BAL-1"}, "items/BAL-1/"),
        ("get_brief", {"item": "BAL-1"}, "items/BAL-1/brief/"),
        ("get_question", {"id": ids["question"]}, f"questions/{ids['question']}/"),
        ("list_questions", {}, "questions/?mine=true"),
        ("list_questions", {"mine": False, "limit": 1}, "questions/?limit=1"),
        ("get_knowledge", {"id": ids["entry"]}, f"/api/v1/knowledge/{ids['entry']}/"),
        ("list_changesets", {"status": "proposed"}, "changesets/?status=proposed"),
        ("search_project", {"query": "export"}, "search/?q=export"),
        ("wait_for_events", {"after": 0, "wait_seconds": 0}, "events/?after=0"),
    ]
    async with connected(key) as session, http({"Authorization": f"Bearer {key}"}) as rest:
        for tool, arguments, path in reads:
            over_mcp = output(await session.call_tool(tool, {"project": "BAL", **arguments}))
            answer = await rest.get(path if path.startswith("/") else API + path)
            assert answer.status_code == 200, (path, answer.text)
            over_rest = answer.json()
            if "count" in over_rest:
                over_rest = listed(over_rest)
            assert over_mcp == over_rest, tool
    assert len({tool for tool, _, _ in reads}) == 10


async def test_work_answers_the_same_claim_and_report_both_ways(project, owner, member, make_item):
    await sync(seed)(project, owner, member, make_item)
    key = await sync(make_key)(member, "read", "work")
    async with connected(key) as session, http({"Authorization": f"Bearer {key}"}) as rest:
        claimed = await rest.post(API + "items/BAL-1/claim/", json={})
        assert claimed.status_code == 201
        again = output(await session.call_tool("claim_ticket", {"project": "BAL", "item": "BAL-1"}))
        renewed = ("renewed_at", "expires_at")
        assert {k: v for k, v in again.items() if k not in renewed} == {
            k: v for k, v in claimed.json().items() if k not in renewed
        }
        claim = again["id"]
        body = {"kind": "progress", "summary": "Half the columns", "idempotency_key": "step-1"}
        reported = await rest.post(f"{API}claims/{claim}/reports/", json=body)
        assert reported.status_code == 201
        retried = output(await session.call_tool("report", {"project": "BAL", "claim": claim, **body}))
        assert retried == reported.json()
        assert {"claim_status", "item_state"} <= retried.keys()

        released = output(await session.call_tool("release_claim", {"project": "BAL", "claim": claim}))
        read = await rest.get(f"{API}claims/{claim}/")
        assert released == read.json()
        assert [r["summary"] for r in released["reports"]] == ["Half the columns"]


async def test_mcp_lists_a_callers_own_questions_unless_told(project, owner, member, make_item):
    await sync(seed)(project, owner, member, make_item)
    key = await sync(make_key)(member, "read")
    async with connected(key) as session:
        mine = output(await session.call_tool("list_questions", {"project": "BAL"}))
        everyone = output(await session.call_tool("list_questions", {"project": "BAL", "mine": False}))
        owners = output(
            await session.call_tool("list_questions", {"project": "BAL", "mine": False, "asker": "owner"})
        )
    assert [q["asker"] for q in mine["results"]] == ["member"]
    assert sorted(q["asker"] for q in everyone["results"]) == ["member", "owner"]
    assert [q["text"] for q in owners["results"]] == ["Which region?"]


@pytest.mark.parametrize(
    "arguments", [{"limit": 0}, {"limit": 201}, {"offset": -1}, {"limit": "2"}], ids=json.dumps
)
async def test_bad_paging_over_mcp_is_a_readable_tool_error(project, member, arguments):
    key = await sync(make_key)(member, "read")
    async with connected(key) as session:
        result = await session.call_tool("list_items", {"project": "BAL", **arguments})
    assert result.is_error
    text = output_text(result)
    assert "invalid_input" in text
    assert next(iter(arguments)) in text


def test_the_planners_tool_and_mcps_of_one_name_each_validate_by_their_own_schema():
    paging = {"limit": 1, "offset": 1}
    planners = TOOLS["list_runnable"].validator()  # the chat validated first, as a busy process does
    mcps = SPECS["list_runnable"].validator()
    assert [error.validator for error in planners.iter_errors(paging)] == ["additionalProperties"]
    assert list(mcps.iter_errors(paging)) == []
