"""Direct edits of one item (tracker.services.item_edits): applied at once or proposed as the project's
direct_edits and four eyes say, stale versions, allowed state moves, labels, priority, policy."""

from __future__ import annotations

import pytest

from tracker.errors import ConflictError, NotFoundError, PermissionDeniedError, ValidationError
from tracker.models import ActivityEvent, Changeset, ChangesetStatus, Dependency, Item
from tracker.operations import TICKET_TRANSITIONS
from tracker.selectors import runnable_tickets
from tracker.services.activity import Actor
from tracker.services.item_edits import item_create_quick, item_edit


def fresh(item: Item) -> Item:
    return Item.objects.get(pk=item.pk)


def set_settings(project, **values) -> None:
    project.settings = {**(project.settings or {}), **values}
    project.save(update_fields=["settings"])


def test_an_edit_is_a_changeset_applied_at_once_by_its_author(project, member, make_item):
    ticket = make_item(title="Old", state="ready")

    outcome = item_edit(
        actor=Actor(user=member), item=ticket, version=1, fields={"title": "New", "priority": "urgent"}
    )

    assert outcome.applied
    changeset = outcome.changeset
    assert changeset.status == ChangesetStatus.APPLIED
    assert changeset.proposed_by == member
    assert changeset.decided_by == member
    assert changeset.operations[0]["base_version"] == 1
    after = fresh(ticket)
    assert (after.title, after.priority, after.version) == ("New", "urgent", 2)
    verbs = list(ActivityEvent.objects.filter(project=project).values_list("verb", flat=True))
    assert {"changeset.proposed", "item.updated", "changeset.applied"} <= set(verbs)


def test_unchanged_fields_are_left_out_and_nothing_to_change_is_refused(member, make_item):
    ticket = make_item(title="Same", state="ready")
    outcome = item_edit(
        actor=Actor(user=member), item=ticket, version=1, fields={"title": "Same", "description": "More"}
    )
    assert outcome.changeset.operations[0]["fields"] == {"description": "More"}

    with pytest.raises(ValidationError) as caught:
        item_edit(actor=Actor(user=member), item=ticket, version=2, fields={"title": "Same"})
    assert "non_field_errors" in caught.value.errors


@pytest.mark.parametrize(
    ("mode", "fields", "blockers", "applied"),
    [
        ("all", {"title": "T"}, False, True),
        ("all", {"state": "draft"}, True, True),
        ("state", {"state": "draft"}, False, True),
        ("state", {"title": "T"}, False, False),
        ("state", {"state": "draft", "title": "T"}, False, False),
        ("state", {"state": "draft"}, True, False),
        ("none", {"state": "draft"}, False, False),
    ],
)
def test_direct_edits_decide_applied_or_proposed(project, member, make_item, mode, fields, blockers, applied):
    set_settings(project, direct_edits=mode)
    blocker = make_item(title="Blocker")
    ticket = make_item(title="Ticket", state="ready")

    outcome = item_edit(
        actor=Actor(user=member),
        item=ticket,
        version=1,
        fields=fields,
        add_blockers=[blocker.key] if blockers else [],
    )

    assert outcome.applied is applied
    expected = ChangesetStatus.APPLIED if applied else ChangesetStatus.PROPOSED
    assert outcome.changeset.status == expected
    after = fresh(ticket)
    assert (after.version > 1) is applied
    assert Dependency.objects.filter(blocked=ticket).exists() is (applied and blockers)


def test_four_eyes_proposes_every_edit(project, maintainer, make_item):
    set_settings(project, four_eyes=True)
    ticket = make_item(state="ready")

    outcome = item_edit(actor=Actor(user=maintainer), item=ticket, version=1, fields={"state": "draft"})

    assert not outcome.applied
    assert outcome.changeset.status == ChangesetStatus.PROPOSED
    assert fresh(ticket).state == "ready"


def test_a_stale_version_conflicts_and_stores_nothing(member, make_item):
    ticket = make_item(state="ready")
    item_edit(actor=Actor(user=member), item=ticket, version=1, fields={"title": "First"})
    before = Changeset.objects.count()

    with pytest.raises(ConflictError) as caught:
        item_edit(actor=Actor(user=member), item=ticket, version=1, fields={"title": "Second"})

    assert caught.value.current is not None
    assert caught.value.current["version"] == 2
    assert Changeset.objects.count() == before
    assert fresh(ticket).title == "First"


def test_a_stale_version_conflicts_even_when_the_edit_would_be_proposed(project, member, make_item):
    set_settings(project, direct_edits="none")
    ticket = make_item(state="ready")
    Item.objects.filter(pk=ticket.pk).update(version=5)

    with pytest.raises(ConflictError):
        item_edit(actor=Actor(user=member), item=ticket, version=1, fields={"title": "Late"})
    assert not Changeset.objects.filter(project=project).exists()


@pytest.mark.parametrize(("start", "moves"), list(TICKET_TRANSITIONS.items()))
def test_ticket_state_moves_follow_the_transitions(member, make_item, start, moves):
    for target in ("draft", "ready", "in_progress", "in_review", "done", "cancelled"):
        if target == start:
            continue
        item = make_item(state=start)
        if target in moves:
            assert item_edit(actor=Actor(user=member), item=item, version=1, fields={"state": target}).applied
            assert fresh(item).state == target
        else:
            with pytest.raises(ValidationError) as caught:
                item_edit(actor=Actor(user=member), item=item, version=1, fields={"state": target})
            message = caught.value.errors["state"][0]
            assert all(move in message for move in moves)
            assert fresh(item).state == start


def test_epic_moves_between_open_done_and_cancelled(member, make_item):
    epic = make_item(kind="epic", title="E")
    item_edit(actor=Actor(user=member), item=epic, version=1, fields={"state": "done"})
    with pytest.raises(ValidationError):
        item_edit(actor=Actor(user=member), item=epic, version=2, fields={"state": "cancelled"})
    item_edit(actor=Actor(user=member), item=epic, version=2, fields={"state": "open"})
    assert fresh(epic).state == "open"


def test_labels_are_the_projects_names_sorted_without_repeats(member, make_item):
    ticket = make_item()
    item_edit(actor=Actor(user=member), item=ticket, version=1, fields={"labels": ["docs", "bug", "Bug "]})
    assert fresh(ticket).labels == ["bug", "docs"]


def test_an_unknown_label_is_a_field_error_naming_the_allowed_ones(project, member, make_item):
    set_settings(project, labels=["bug", "ux"])
    ticket = make_item()

    with pytest.raises(ValidationError) as caught:
        item_edit(actor=Actor(user=member), item=ticket, version=1, fields={"labels": ["bug", "feature"]})

    message = caught.value.errors["labels"][0]
    assert "feature" in message
    assert "bug, ux" in message
    assert fresh(ticket).labels == []


def test_too_many_labels_and_a_bad_priority_are_field_errors(member, make_item):
    ticket = make_item()
    with pytest.raises(ValidationError) as caught:
        item_edit(
            actor=Actor(user=member),
            item=ticket,
            version=1,
            fields={"labels": [f"l{i}" for i in range(11)], "priority": "asap"},
        )
    assert set(caught.value.errors) == {"labels", "priority"}


def test_policy_needs_policy_set(member, maintainer, make_item):
    ticket = make_item()
    with pytest.raises(ValidationError) as caught:
        item_edit(actor=Actor(user=member), item=ticket, version=1, fields={"policy": {"review": "none"}})
    assert "policy.set" in caught.value.errors["policy"][0]

    item_edit(actor=Actor(user=maintainer), item=ticket, version=1, fields={"policy": {"review": "none"}})
    assert fresh(ticket).policy == {"review": "none"}


def test_blockers_are_added_and_removed_by_key(member, make_item):
    blocker = make_item(title="Blocker")
    ticket = make_item(state="ready")

    item_edit(actor=Actor(user=member), item=ticket, version=1, add_blockers=[blocker.key.lower()])
    assert ticket not in runnable_tickets(project=ticket.project)

    item_edit(actor=Actor(user=member), item=ticket, version=1, remove_blockers=[blocker.key])
    assert not Dependency.objects.filter(blocked=ticket).exists()


def test_an_unknown_blocker_and_a_cycle_are_errors_on_add_blockers(member, make_item):
    first = make_item(title="First")
    second = make_item(title="Second")
    item_edit(actor=Actor(user=member), item=second, version=1, add_blockers=[first.key])

    with pytest.raises(ValidationError) as caught:
        item_edit(actor=Actor(user=member), item=first, version=1, add_blockers=[second.key, "BAL-999"])

    assert "add_blockers" in caught.value.errors
    assert any("cycle" in m for m in caught.value.errors["add_blockers"])
    assert any("BAL-999" in m for m in caught.value.errors["add_blockers"])


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"version": "1", "fields": {"title": "x"}}, "version"),
        ({"version": True, "fields": {"title": "x"}}, "version"),
        ({"version": 1, "fields": {"colour": "red"}}, "colour"),
        ({"version": 1, "fields": {"title": "a\x00b"}}, "title"),
        ({"version": 1, "fields": {"title": "x" * 201}}, "title"),
        ({"version": 1, "add_blockers": "BAL-1"}, "add_blockers"),
        ({"version": 1, "add_blockers": [7]}, "add_blockers"),
    ],
)
def test_bad_input_is_a_field_error(member, make_item, kwargs, field):
    ticket = make_item()
    with pytest.raises(ValidationError) as caught:
        item_edit(actor=Actor(user=member), item=ticket, **kwargs)
    assert field in caught.value.errors
    assert not Changeset.objects.exists()


def test_viewers_and_strangers_may_not_edit(viewer, users, make_item):
    ticket = make_item()
    with pytest.raises(PermissionDeniedError):
        item_edit(actor=Actor(user=viewer), item=ticket, version=1, fields={"title": "x"})
    with pytest.raises(NotFoundError):
        item_edit(actor=Actor(user=users["stranger"]), item=ticket, version=1, fields={"title": "x"})


def test_quick_create_applies_or_proposes(project, member, make_item):
    epic = make_item(kind="epic", title="Epic")
    outcome = item_create_quick(actor=Actor(user=member), project=project, title=" Fix it ", epic=epic.key)
    assert outcome.applied
    created = Item.objects.get(project=project, title="Fix it")
    assert created.epic == epic
    assert outcome.changeset.created_items == {"new": created.key}

    set_settings(project, direct_edits="state")
    proposed = item_create_quick(actor=Actor(user=member), project=project, title="Later", priority="high")
    assert not proposed.applied
    assert not Item.objects.filter(title="Later").exists()

    with pytest.raises(ValidationError) as caught:
        item_create_quick(actor=Actor(user=member), project=project, title="  ")
    assert "title" in caught.value.errors
