"""The planner's knowledge writes as cards (docs/domain.md#knowledge-cards): the entry and its diff,
live as a draft frame and in the transcript; a write waiting for approval shows the diff it would
make, never an entry its approvers may not read."""

from __future__ import annotations

from typing import Any

import pytest

from knowledge.diffs import MAX_ROWS, text_diff
from knowledge.services import knowledge_create
from planner.domain.knowledge_cards import knowledge_cards_of, knowledge_preview
from planner.domain.services.previews import request_preview
from planner.domain.services.sessions import session_create
from planner.domain.tools import ToolContext, call_tool
from planner.models import ToolCall
from tests.factories import make_membership, make_project
from tracker.models import Role
from tracker.services.activity import Actor

pytestmark = pytest.mark.django_db


def test_a_diff_shows_each_change_with_a_little_context_and_folds_the_rest():
    before = "\n".join(f"line {n}" for n in range(1, 21))
    after = before.replace("line 10", "line ten").replace("line 20", "line 20\nline 21")
    rows = text_diff(before, after)
    assert [(r["op"], r["text"]) for r in rows] == [
        ("skip", "7 unchanged lines"),
        ("same", "line 8"),
        ("same", "line 9"),
        ("removed", "line 10"),
        ("added", "line ten"),
        ("same", "line 11"),
        ("same", "line 12"),
        ("skip", "6 unchanged lines"),
        ("same", "line 19"),
        ("same", "line 20"),
        ("added", "line 21"),
    ]
    assert text_diff("same", "same") == [{"op": "same", "text": "same"}]
    assert [r["op"] for r in text_diff("", "a\nb")] == ["added", "added"]


def test_a_huge_diff_is_cut_and_says_so():
    rows = text_diff("", "\n".join(str(n) for n in range(MAX_ROWS + 50)))
    assert len(rows) == MAX_ROWS + 1
    assert rows[-1] == {"op": "cut", "text": "50 more lines of changes: open the entry to read them"}


def _ctx(session) -> ToolContext:
    return ToolContext(user=session.user, project=session.project, session_id=session.pk)


def _call(session, name, args, tool_use_id):
    context = _ctx(session)
    outcome = call_tool(name, args, context)
    assert not outcome.is_error, outcome.output
    ToolCall.objects.create(
        session=session,
        turn=1,
        tool_use_id=tool_use_id,
        name=name,
        input=args,
        output=outcome.output,
        actor=context.actor.label,
        on_behalf_of=session.user,
    )
    return outcome.output, context.drafts


def test_a_knowledge_write_shows_as_a_card_with_its_diff_live_and_in_the_transcript(project, member):
    session = session_create(user=member, project=project)
    created, drafts = _call(
        session,
        "create_knowledge",
        {"kind": "decision", "title": "Refunds", "body": "Refunds: 7 days."},
        "t1",
    )
    (card,) = drafts
    assert (card.kind, card.artifact_id) == ("knowledge", f"knowledge:{created['id']}")
    assert card.snapshot["op"] == "create"
    assert card.snapshot["diff"] == [{"op": "added", "text": "Refunds: 7 days."}]
    assert card.snapshot["url"] == f"/projects/{project.key}/knowledge/{created['id']}/"
    args = {"id": created["id"], "version": 1, "title": "Refund window", "body": "Refunds: 14 days."}
    _updated, (changed,) = _call(session, "update_knowledge", args, "t2")
    snap = changed.snapshot
    assert (snap["op"], snap["version"], snap["previous"]["version"]) == ("update", 2, 1)
    assert snap["previous"]["title"] == "Refunds"
    assert snap["diff"] == [
        {"op": "removed", "text": "Refunds: 7 days."},
        {"op": "added", "text": "Refunds: 14 days."},
    ]
    cards = knowledge_cards_of(session=session)
    assert set(cards) == {"t1", "t2"}
    assert cards["t2"] == snap  # the transcript's card is the live one
    assert cards["t1"]["version"] == 1  # each card is its own revision, not the entry as it is now


def test_a_failed_write_shows_no_card(project, member):
    session = session_create(user=member, project=project)
    outcome = call_tool("update_knowledge", {"id": 999, "version": 1, "title": "x"}, context := _ctx(session))
    assert outcome.is_error
    assert context.drafts == []


def test_an_approval_shows_the_write_against_the_entry_as_it_stands(project, member):
    entry = knowledge_create(
        actor=Actor(user=member), kind="note", title="Courts", body="Four courts.", projects=[project]
    )
    rows: list[Any] = request_preview(
        tool="update_knowledge",
        input={"id": entry.pk, "version": 1, "body": "Five courts."},
        project=project,
    )
    (row,) = rows
    assert (row["kind"], row["op"], row["id"], row["title"], row["stale"], row["hidden"]) == (
        "knowledge",
        "update",
        entry.pk,
        "Courts",
        False,
        False,
    )
    assert row["diff"] == [{"op": "removed", "text": "Four courts."}, {"op": "added", "text": "Five courts."}]
    stale: Any = knowledge_preview({"id": entry.pk, "version": 0, "title": "Courts!"}, project)[0]
    assert stale["stale"] is True
    new: list[Any] = request_preview(
        tool="create_knowledge", input={"kind": "debt", "title": "T", "body": "B"}, project=project
    )
    assert (new[0]["op"], new[0]["entry_kind"], new[0]["previous"]) == ("create", "debt", None)


def test_an_approval_never_shows_an_entry_linked_beyond_the_project(org, project, member, owner):
    elsewhere = make_project(organization=org, key="SEC")
    make_membership(project=elsewhere, user=owner, role=Role.OWNER)
    secret = knowledge_create(
        actor=Actor(user=owner), kind="note", title="Salaries", body="Alice: 100k", projects=[elsewhere]
    )
    row: Any
    (row,) = knowledge_preview({"id": secret.pk, "version": 1, "body": "x"}, project)
    assert row["hidden"] is True
    assert row["previous"] is None
    assert "Alice" not in str(row)
    assert "Salaries" not in str(row)
