"""Every activity is a typed event, recorded in the activity's transaction, readable exactly as the
object it is about (docs/events.md)."""

from __future__ import annotations

from typing import cast

import pytest
from django.contrib.auth.models import User
from django.db import transaction

from knowledge.services import knowledge_create
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tracker.event_selectors import event_head, events_after
from tracker.models import Event, Project, Role
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_apply, changeset_propose
from tracker.services.events import EVENT_TYPES, VERB_TYPES, events_gathered
from tracker.services.items import dependency_add, dependency_remove, item_update
from tracker.services.work import claim_release, claim_take


def types_of(project, after: int = 0) -> list[tuple[str, str]]:
    return [(e.type, e.target) for e in Event.objects.filter(project=project, id__gt=after).order_by("id")]


def test_every_mapped_verb_makes_an_event_of_the_catalogue():
    assert set(VERB_TYPES.values()) <= set(EVENT_TYPES)
    assert set(EVENT_TYPES) - set(VERB_TYPES.values()) == {"item.runnable", "request.waiting"}


def test_a_claim_is_an_event_with_the_activity(project, member, make_item):
    ticket = make_item(title="Checkout", state="ready")
    start = event_head(user=member, project=project)
    claim_take(actor=Actor(user=member), project=project, item=ticket)
    kinds = [kind for kind, _ in types_of(project, start)]
    assert "claim.taken" in kinds
    event = Event.objects.get(type="claim.taken")
    assert event.actor == "user:member"
    assert event.target == ticket.key
    assert event.data["target"] == ticket.key


def test_an_activity_rolled_back_leaves_no_event(project, owner, make_item):
    ticket = make_item(title="Checkout")
    before = Event.objects.count()

    def failing_request() -> None:
        with transaction.atomic():
            item_update(actor=Actor(user=owner), item=ticket, fields={"title": "Renamed"})
            assert Event.objects.count() == before + 1
            raise RuntimeError("the request failed after the write")

    with pytest.raises(RuntimeError):
        failing_request()
    assert Event.objects.count() == before


def test_a_claim_and_its_release_record_their_events_in_order_and_announce_the_ticket_last(
    project, owner, member, make_item
):
    ticket = make_item(title="Checkout", state="ready")
    start = event_head(user=owner, project=project)
    claim = claim_take(actor=Actor(user=member), project=project, item=ticket)
    claim_release(actor=Actor(user=member), claim=claim)
    assert types_of(project, start) == [
        ("item.updated", ticket.key),
        ("claim.taken", ticket.key),
        ("item.updated", ticket.key),
        ("claim.released", ticket.key),
        ("item.runnable", ticket.key),  # once the claim has let it go
    ]


def test_gathered_events_are_recorded_as_the_block_ends_and_not_when_it_fails(project, owner, make_item):
    ticket = make_item(title="Checkout")
    start = event_head(user=owner, project=project)
    with transaction.atomic(), events_gathered():
        item_update(actor=Actor(user=owner), item=ticket, fields={"title": "Renamed"})
        with events_gathered():  # nested: the outer block records it
            item_update(actor=Actor(user=owner), item=ticket, fields={"state": "ready"})
        assert types_of(project, start) == []
    assert types_of(project, start) == [
        ("item.updated", ticket.key),
        ("item.updated", ticket.key),
        ("item.runnable", ticket.key),
    ]

    def failing_write() -> None:
        with transaction.atomic(), events_gathered():
            item_update(actor=Actor(user=owner), item=ticket, fields={"title": "Lost"})
            raise RuntimeError("the write failed after the activity")

    head = event_head(user=owner, project=project)
    with pytest.raises(RuntimeError):
        failing_write()
    assert types_of(project, head) == []


def test_a_ticket_made_ready_without_blockers_becomes_runnable(project, owner, make_item):
    ticket = make_item(title="Checkout")
    start = event_head(user=owner, project=project)
    item_update(actor=Actor(user=owner), item=ticket, fields={"state": "ready"})
    assert types_of(project, start) == [("item.updated", ticket.key), ("item.runnable", ticket.key)]


def test_resolving_the_last_blocker_makes_its_dependents_runnable(project, owner, make_item):
    blocker = make_item(title="API", state="ready")
    other = make_item(title="Schema", state="ready")
    blocked = make_item(title="Checkout", state="ready")
    actor = Actor(user=owner)
    dependency_add(actor=actor, blocker=blocker, blocked=blocked)
    dependency_add(actor=actor, blocker=other, blocked=blocked)
    start = event_head(user=owner, project=project)

    item_update(actor=actor, item=blocker, fields={"state": "done"})
    assert ("item.runnable", blocked.key) not in types_of(project, start)  # still blocked by the other

    item_update(actor=actor, item=other, fields={"state": "cancelled"})
    assert ("item.runnable", blocked.key) in types_of(project, start)


def test_removing_the_dependency_makes_the_blocked_ticket_runnable(project, owner, make_item):
    blocker = make_item(title="API", state="ready")
    blocked = make_item(title="Checkout", state="ready")
    actor = Actor(user=owner)
    dependency_add(actor=actor, blocker=blocker, blocked=blocked)
    start = event_head(user=owner, project=project)
    dependency_remove(actor=actor, blocker=blocker, blocked=blocked)
    assert types_of(project, start) == [("item.updated", blocked.key), ("item.runnable", blocked.key)]


def test_a_claimed_ticket_is_not_announced_runnable(project, owner, member, make_item):
    blocker = make_item(title="API", state="ready")
    blocked = make_item(title="Checkout", state="ready")
    dependency_add(actor=Actor(user=owner), blocker=blocker, blocked=blocked)
    claim_take(actor=Actor(user=member), project=project, item=blocker)
    start = event_head(user=owner, project=project)
    item_update(actor=Actor(user=owner), item=blocked, fields={"state": "ready", "title": "Checkout v2"})
    assert [kind for kind, _ in types_of(project, start)] == ["item.updated"]


def test_a_changeset_announces_only_what_is_runnable_once_applied(project, owner, member, make_item):
    """It creates a ready ticket, then makes it wait on another: the ticket was never runnable."""
    blocker = make_item(title="API", state="ready")
    changeset = changeset_propose(
        actor=Actor(user=member),
        project=project,
        title="Checkout",
        operations=[
            {"op": "create", "ref": "x", "kind": "ticket", "fields": {"title": "Checkout", "state": "ready"}},
            {"op": "create", "ref": "y", "kind": "ticket", "fields": {"title": "Receipt", "state": "ready"}},
            {"op": "add_dependency", "blocker": blocker.key, "blocked": "$x"},
        ],
    )
    start = event_head(user=owner, project=project)
    applied = changeset_apply(actor=Actor(user=owner), changeset=changeset)
    x, y = applied.created_items["x"], applied.created_items["y"]
    recorded = types_of(project, start)
    assert ("item.runnable", y) in recorded
    assert ("item.runnable", x) not in recorded
    assert recorded[-1] == ("changeset.applied", f"changeset:{changeset.number}")


def test_knowledge_linked_to_two_projects_reaches_only_who_reads_both(org, project, owner, member):
    second = cast(Project, ProjectFactory(organization=org, key="SEC", name="Second"))
    MembershipFactory(project=second, user=owner, role=Role.OWNER)
    knowledge_create(actor=Actor(user=owner), kind="note", title="Shared secret", projects=[project, second])
    seen_by_owner = events_after(user=owner, project=project, after=0, types=("knowledge.created",))
    seen_by_member = events_after(user=member, project=project, after=0, types=("knowledge.created",))
    assert [e["data"]["title"] for e in seen_by_owner.events] == ["Shared secret"]
    assert seen_by_member.events == []
    assert seen_by_member.next == seen_by_owner.next  # the hidden event is not read twice


def test_a_reader_removed_reads_nothing_more(project, member, make_item):
    make_item(title="Checkout")
    assert events_after(user=member, project=project, after=0).events
    member.memberships.all().delete()
    from tracker.errors import NotFoundError  # noqa: PLC0415

    with pytest.raises(NotFoundError):
        events_after(user=member, project=project, after=0)


def test_the_feed_reads_on_from_next_and_narrows_to_types(project, owner, make_item):
    first = make_item(title="One")
    page = events_after(user=owner, project=project, after=0)
    assert [e["target"] for e in page.events][-1] == first.key
    second = make_item(title="Two")
    later = events_after(user=owner, project=project, after=page.next)
    assert [(e["type"], e["target"]) for e in later.events] == [("item.created", second.key)]
    assert events_after(user=owner, project=project, after=0, types=("claim.taken",)).events == []


def test_another_projects_events_stay_there(org, project, owner, make_item):
    other = cast(Project, ProjectFactory(organization=org, key="OTR", name="Other"))
    outsider = cast(User, UserFactory(username="outsider"))
    MembershipFactory(project=other, user=outsider, role=Role.OWNER)
    make_item(title="Private plan")
    assert events_after(user=outsider, project=other, after=0).events == []
