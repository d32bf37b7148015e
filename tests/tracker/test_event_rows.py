"""What recording an event reads in SQL (tracker/db/event_rows.py), against its ORM twins, in both
databases: a ticket's audience, runnable tickets, items by number, dependents, enabled webhooks."""

from __future__ import annotations

import datetime
from typing import cast

import pytest
from django.contrib.auth.models import User
from django.db.models import Exists, OuterRef
from django.utils import timezone

from tests.factories import UserFactory
from tracker.db import event_rows, model_rows
from tracker.db.event_rows import Candidates, TicketsAsked
from tracker.models import Claim, ClaimStatus, Dependency, Event, Item, ItemKind, Watch, Webhook
from tracker.selectors import unresolved_blockers
from tracker.work_selectors import held

pytestmark = pytest.mark.django_db


def runnable_by_orm(ids: set[int]) -> list[int]:
    claimed = Claim.objects.filter(held(timezone.now()), item=OuterRef("pk"))
    return list(
        Item.objects.filter(pk__in=ids, kind=ItemKind.TICKET, state="ready")
        .exclude(Exists(unresolved_blockers(blocked=OuterRef("pk"))))
        .exclude(Exists(claimed))
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def claim(item: Item, holder, *, status: str = ClaimStatus.ACTIVE, minutes: int = 30) -> Claim:
    return Claim.objects.create(
        project=item.project,
        item=item,
        holder=holder,
        status=status,
        renewed_at=timezone.now(),
        expires_at=timezone.now() + datetime.timedelta(minutes=minutes),
    )


def test_runnable_tickets_are_those_the_orm_finds(project, owner, member, make_item):
    free = make_item(title="Free", state="ready", priority="urgent", labels=["backend"])
    blocked = make_item(title="Blocked", state="ready")
    blocker = make_item(title="Blocker", state="ready")
    unblocked = make_item(title="Unblocked", state="ready")
    done = make_item(title="Done blocker", state="done")
    held_one = make_item(title="Held", state="ready")
    lapsed = make_item(title="Lapsed claim", state="ready")
    released = make_item(title="Released claim", state="ready")
    draft = make_item(title="Draft", state="draft")
    epic = make_item(kind="epic", title="Epic")
    Dependency.objects.create(blocker=blocker, blocked=blocked)
    Dependency.objects.create(blocker=done, blocked=unblocked)
    claim(held_one, member)
    claim(lapsed, member, minutes=-1)
    claim(released, member, status=ClaimStatus.RELEASED)
    ids = {i.pk for i in (free, blocked, unblocked, held_one, lapsed, released, draft, epic)}

    found = event_rows.runnable_among(Candidates(ids=tuple(sorted(ids))))

    assert [ticket.id for ticket in found] == runnable_by_orm(ids)
    assert {ticket.key for ticket in found} == {free.key, unblocked.key, lapsed.key, released.key}
    first = found[0]
    assert (first.title, first.priority, first.labels) == ("Free", "urgent", ["backend"])
    assert (first.project_id, first.organization_id) == (project.pk, project.organization_id)
    assert event_rows.runnable_among(Candidates()) == []
    by_number = Candidates(project_id=project.pk, numbers=(free.number, blocked.number))
    assert [ticket.key for ticket in event_rows.runnable_among(by_number)] == [free.key]


def test_a_tickets_audience_is_its_watchers_and_claim_holders_as_the_orm_reads_them(
    project, owner, member, viewer, make_item
):
    watched = make_item(title="Watched")
    claimed = make_item(title="Claimed")
    nobody = make_item(title="Nobody's")
    Watch.objects.create(item=watched, user=viewer)
    Watch.objects.create(item=watched, user=member)
    claim(claimed, member)
    ended = claim(nobody, owner, status=ClaimStatus.EXPIRED)

    numbers = tuple(sorted([watched.number, claimed.number, nobody.number]))
    found = event_rows.ticket_audiences(TicketsAsked(project.pk, numbers))
    named = event_rows.ticket_audiences(TicketsAsked(project.pk, numbers, claims=(ended.pk,)))
    every = event_rows.ticket_audiences(TicketsAsked(project.pk, numbers, every=True))

    def watchers_and_holders(item: Item) -> frozenset[int]:
        watching = Watch.objects.filter(item=item).values_list("user_id", flat=True)
        holding = Claim.objects.filter(item=item, status=ClaimStatus.ACTIVE).values_list(
            "holder_id", flat=True
        )
        return frozenset([*watching, *holding])

    assert {n: t.audience for n, t in found.items()} == {
        watched.number: watchers_and_holders(watched),
        claimed.number: watchers_and_holders(claimed),
    }
    assert found[watched.number].title == "Watched"
    # The claim an event names (ended, say): its holder, for that event alone.
    assert named[nobody.number].named == {ended.pk: owner.pk}
    assert named[nobody.number].audience == frozenset()
    assert found[claimed.number].named == {}
    assert every[nobody.number].audience == frozenset()  # with every: the ticket, told to no one yet
    assert event_rows.ticket_audiences(TicketsAsked(project.pk, ())) == {}


def test_another_projects_tickets_of_the_same_number_are_not_read(project, other_project, member, make_item):
    mine = make_item(title="Mine")
    theirs = Item.objects.create(project=other_project, number=mine.number, kind="ticket", title="Theirs")
    Watch.objects.create(item=theirs, user=member)

    assert event_rows.ticket_audiences(TicketsAsked(project.pk, (mine.number,))) == {}
    assert event_rows.candidate_ids(Candidates(project_id=project.pk, numbers=(mine.number,))) == {mine.pk}


def test_dependents_are_the_items_their_blockers_block(project, make_item):
    blocker, first, second, alone = (make_item(title=t) for t in ("Blocker", "First", "Second", "Alone"))
    Dependency.objects.create(blocker=blocker, blocked=first)
    Dependency.objects.create(blocker=blocker, blocked=second)

    asked = Candidates(project_id=project.pk, numbers=(blocker.number, alone.number), dependents=True)
    found = event_rows.candidate_ids(asked)

    assert found == set(
        Dependency.objects.filter(blocker__in=[blocker, alone]).values_list("blocked_id", flat=True)
    )
    assert found == {first.pk, second.pk}


def test_enabled_webhooks_are_those_the_orm_finds(project, other_project, owner):
    def hook(project, name: str, **fields) -> Webhook:
        return Webhook.objects.create(
            project=project, name=name, url="https://example.com/", secret="x", created_by=owner, **fields
        )

    wanted = hook(project, "Claims", types=["claim.taken", "claim.released"])
    every = hook(project, "Everything")
    hook(project, "Off", enabled=False)
    hook(other_project, "Theirs")

    found = event_rows.webhooks_enabled({project.pk})

    assert [h.id for h in found] == list(
        Webhook.objects.filter(project=project, enabled=True).order_by("pk").values_list("pk", flat=True)
    )
    assert [(h.id, h.types, h.created_by_id) for h in found] == [
        (wanted.pk, ["claim.taken", "claim.released"], owner.pk),
        (every.pk, [], owner.pk),
    ]
    assert event_rows.webhooks_enabled(set()) == []


def test_events_inserted_in_sql_read_back_as_the_orm_writes_them(project, owner):
    reader = cast(User, UserFactory())
    events = [
        Event(
            organization_id=project.organization_id,
            project=project,
            type="item.updated",
            actor="user:owner",
            on_behalf_of=owner,
            target=f"{project.key}-{n}",
            data={"target": f"{project.key}-{n}", "changes": {"title": ["Before", 'After "ü"']}},
            requires=[project.pk],
            private_to=reader if n == 2 else None,
        )
        for n in (1, 2)
    ]

    model_rows.insert_returning(events)

    assert [e.pk for e in events] == list(
        Event.objects.filter(project=project).order_by("pk").values_list("pk", flat=True)
    )
    for event in events:
        stored = Event.objects.get(pk=event.pk)
        assert event._state.adding is False
        assert (stored.data, stored.requires, stored.private_to_id) == (
            event.data,
            event.requires,
            event.private_to_id,
        )
        assert stored.created_at == event.created_at
