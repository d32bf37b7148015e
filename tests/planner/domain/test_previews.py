"""The readable preview of a tool call waiting for approval (planner/domain/services/previews.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from planner.agent.frames import OperationPreview, PreviewRow
from planner.domain.services.previews import MAX_TEXT, request_preview
from tracker.services.activity import Actor
from tracker.services.items import dependency_add, item_update


def operations_of(rows: list[PreviewRow]) -> list[OperationPreview]:
    return [row for row in rows if row["kind"] == "operation"]


def fields_of(rows: list[PreviewRow]) -> dict[str, str]:
    return {row["label"]: row["value"] for row in rows if row["kind"] == "field"}


@pytest.fixture
def plan(project, owner, make_item):
    epic = make_item(kind="epic", title="Accounts")
    ticket = make_item(title="Old title", acceptance_criteria=["Loads"])
    blocker = make_item(title="Blocker")
    dependency_add(actor=Actor(user=owner), blocker=blocker, blocked=ticket)
    return {"epic": epic, "ticket": ticket, "blocker": blocker}


def test_a_changeset_reads_as_the_admin_review_shows_it(project, plan):
    ticket, epic, blocker = plan["ticket"], plan["epic"], plan["blocker"]
    rows = request_preview(
        tool="propose_changeset",
        input={
            "title": "Login work",
            "rationale": "Users need to sign in.",
            "operations": [
                {
                    "op": "create",
                    "ref": "login",
                    "kind": "ticket",
                    "fields": {"title": "Login form", "epic": epic.key, "acceptance_criteria": ["Errors"]},
                },
                {"op": "update", "item": ticket.key, "base_version": 1, "fields": {"title": "New title"}},
                {"op": "add_dependency", "blocker": "$login", "blocked": ticket.key},
                {"op": "remove_dependency", "blocker": blocker.key, "blocked": ticket.key},
            ],
        },
        project=project,
    )
    assert fields_of(rows) == {"title": "Login work", "rationale": "Users need to sign in."}
    create, update, add, remove = operations_of(rows)
    # A new ticket is named by its title, never by its ref (SPEC § 9 "Everywhere").
    assert (create["label"], create["subject"]) == ("Create", "new ticket")
    created = {f["name"]: f["proposed"] for f in create["fields"]}
    assert created == {
        "title": "Login form",
        "epic": f"{epic.key} · Accounts",
        "acceptance_criteria": "• Errors",
        "state": "draft (default)",
    }
    assert (update["label"], update["subject"]) == ("Update", f"{ticket.key} · Old title")
    assert update["fields"] == [
        {"name": "title", "label": "Title", "current": "Old title", "proposed": "New title", "changed": True}
    ]
    assert [f["label"] for f in create["fields"]] == ["Title", "Acceptance criteria", "Epic", "State"]
    assert (add["blocker"], add["blocked"]) == ("Login form (new ticket)", f"{ticket.key} · Old title")
    assert (remove["label"], remove["blocker"]) == ("Remove dependency", f"{blocker.key} · Blocker")
    assert all(not op["errors"] and not op["warning"] for op in (create, update, add, remove))
    json.dumps(rows)  # the rows travel in a frame


def test_a_stale_update_warns_and_carries_the_error_apply_would_meet(project, owner, plan):
    ticket = plan["ticket"]
    item_update(actor=Actor(user=owner), item=ticket, fields={"title": "Renamed"})
    rows = request_preview(
        tool="propose_changeset",
        input={
            "title": "T",
            "operations": [
                {"op": "update", "item": ticket.key, "base_version": 1, "fields": {"state": "ready"}}
            ],
        },
        project=project,
    )
    (update,) = operations_of(rows)
    assert "version 2" in update["warning"]
    assert update["errors"]
    assert update["fields"][0]["current"] == "draft"


def test_an_unknown_item_and_an_unreadable_operation_are_named_not_raised(project, plan):
    rows = request_preview(
        tool="propose_changeset",
        input={
            "title": "T",
            "operations": [
                {"op": "update", "item": "BAL-999", "base_version": 1, "fields": {"title": "x"}},
                {"op": ["create"], "kind": ["ticket"]},
                "not an operation",
                {"op": "create", "kind": {"a": 1}, "fields": ["title"]},
            ],
        },
        project=project,
    )
    unknown, listed, text, odd = operations_of(rows)
    assert unknown["subject"] == "BAL-999 (unknown item)"
    assert unknown["errors"]
    assert (listed["label"], text["label"]) == ("Unreadable operation", "Unreadable operation")
    assert '"not an operation"' in text["raw"]
    assert odd["label"] == "Create"


@pytest.mark.parametrize(
    "value",
    [
        {"title": "T"},  # no operations
        {"title": "T", "operations": "all of them"},
        {"title": "T", "operations": None},
    ],
)
def test_a_changeset_without_a_list_of_operations_falls_back_to_plain_rows(project, value):
    rows = request_preview(tool="propose_changeset", input=value, project=project)
    assert operations_of(rows) == []
    assert fields_of(rows)["title"] == "T"


def test_a_changeset_that_cannot_be_read_falls_back_to_plain_rows(project):
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    rows = request_preview(
        tool="propose_changeset",
        input={"title": "T", "operations": [{"op": "create", "fields": deep}]},
        project=project,
    )
    assert operations_of(rows) == []
    assert set(fields_of(rows)) == {"title", "operations"}
    assert fields_of(rows)["operations"] == "(unreadable value)"


def test_another_tool_reads_field_by_field(project):
    rows = request_preview(
        tool="a_tool_of_tomorrow",
        input={
            "kind": "decision",
            "title": "<b>Use Postgres</b>",
            "projects": ["BAL"],
            "body": "x" * (MAX_TEXT + 10),
        },
        project=project,
    )
    assert list(fields_of(rows)) == ["kind", "title", "projects", "body"]
    assert len(rows) == 4
    text = fields_of(rows)
    assert text["title"] == "<b>Use Postgres</b>"  # plain text: the page escapes it
    assert text["projects"] == '[\n  "BAL"\n]'
    assert len(text["body"]) < MAX_TEXT + 20
    assert text["body"].endswith("(cut short)")


@pytest.mark.parametrize("value", [None, "text", 3, ["a"], {"": {"\u0000": [1.5, None]}}])
def test_any_input_at_all_gets_rows(project, value):
    for tool in ("propose_changeset", "update_knowledge", "no_such_tool"):
        rows = request_preview(tool=tool, input=value, project=project)
        assert rows
        assert all(isinstance(row["value"], str) for row in rows if row["kind"] == "field")
        json.dumps(rows)
