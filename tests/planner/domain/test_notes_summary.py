"""A change note in a line for the chat's readers (docs/protocol.md#the-transcript): what changed,
by whom, keys and numbers the page links, a few changes named and the rest counted."""

from __future__ import annotations

import pytest

from knowledge.services import knowledge_create
from planner.domain.services.notes import MAX_SUMMARY, notes_for, notes_summary
from planner.models import Event, Message
from tests.fakes.scripted import say
from tests.planner.api_client import client_for
from tests.planner.conftest import drive, sync
from tracker.models import ActivityEvent
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_apply, changeset_propose
from tracker.services.items import dependency_add, item_update


def summary_for(project, user, focus=()) -> str:
    events = list(ActivityEvent.objects.filter(organization_id=project.organization_id).order_by("seq"))
    noted = notes_for(events, session_label="planner:x", project=project, user=user, focus=focus)
    return notes_summary(noted)


def after(project) -> int:
    return ActivityEvent.objects.filter(organization_id=project.organization_id).count()


@pytest.mark.django_db
def test_a_note_says_what_changed_and_who_did_it(project, make_item, owner, member):
    ticket = make_item(title="Export", state="in_progress")
    blocker = make_item(title="Schema", state="ready")
    ActivityEvent.objects.all().delete()  # only what happens from here
    item_update(actor=Actor(user=owner), item=ticket, fields={"state": "done"})
    dependency_add(actor=Actor(user=member), blocker=blocker, blocked=ticket)
    item_update(actor=Actor(user=owner), item=blocker, fields={"title": "Schema v2"})

    assert summary_for(project, member) == (
        f"{ticket.key} moved to done by owner; {ticket.key} now waits for {blocker.key} by member; "
        f"{blocker.key} edited by owner (title)"
    )


@pytest.mark.django_db
def test_changesets_and_knowledge_are_named_by_number(project, make_item, owner, member):
    operations = [{"op": "create", "kind": "ticket", "fields": {"title": "CSV"}}]
    changeset = changeset_propose(
        actor=Actor(user=member), project=project, title="Add CSV", operations=operations
    )
    ActivityEvent.objects.all().delete()
    changeset_apply(actor=Actor(user=owner), changeset=changeset)
    entry = knowledge_create(
        actor=Actor(user=owner), kind="decision", title="DB", body="PG", projects=[project]
    )

    summary = summary_for(project, member)

    assert summary.split("; ")[1:] == [  # after the ticket it created
        f"changeset #{changeset.number} applied by owner",
        f"knowledge #{entry.pk} created by owner",
    ]
    assert "Add CSV" not in summary  # titles are the workspace's text: the note's fold has them


@pytest.mark.django_db
def test_a_long_note_names_a_few_changes_and_counts_the_rest(project, make_item, owner, member):
    items = [make_item(title=f"T{n}", state="draft") for n in range(MAX_SUMMARY + 3)]
    ActivityEvent.objects.all().delete()
    for item in items:
        item_update(actor=Actor(user=owner), item=item, fields={"state": "ready"})

    summary = summary_for(project, member)

    parts = summary.split("; ")
    assert parts[:MAX_SUMMARY] == [f"{item.key} moved to ready by owner" for item in items[:MAX_SUMMARY]]
    assert parts[-1] == "and 3 more changes"


@pytest.mark.django_db
def test_what_the_session_follows_comes_first(project, make_item, owner, member):
    first, followed = make_item(title="One", state="draft"), make_item(title="Two", state="draft")
    ActivityEvent.objects.all().delete()
    item_update(actor=Actor(user=owner), item=first, fields={"state": "ready"})
    item_update(actor=Actor(user=owner), item=followed, fields={"state": "ready"})

    assert summary_for(project, member, focus=[followed.key]).startswith(f"{followed.key} moved to ready")


@pytest.mark.django_db(transaction=True)
async def test_the_transcript_gives_each_note_its_summary(planner, model, session, member, owner, make_item):
    ticket = await sync(make_item)(title="Export", state="in_progress")
    await sync(item_update)(actor=Actor(user=owner), item=ticket, fields={"state": "done"})

    model.add(say("Noted."))
    await drive(planner, session, member, "What changed?")

    note = await sync(lambda: Message.objects.get(session=session, kind="changes"))()
    event = await sync(lambda: Event.objects.get(session=session, kind="changes_noted"))()
    assert event.data["seq"] == note.seq
    body = (await (await client_for(member)).get(f"/api/v1/planner/sessions/{session.pk}")).json()
    (shown,) = [m for m in body["messages"] if m["kind"] == "changes"]
    assert shown["summary"] == f"{ticket.key} created by owner; {ticket.key} moved to done by owner"
    assert "<workspace-changes>" in shown["content"][0]["text"]  # the model's text stays as it was
    assert all("summary" not in m for m in body["messages"] if m["kind"] != "changes")
