"""Reads of the plan and ticket pages: the tree, the board, blockers, recent activity, the
changesets and events that touched one item (docs/architecture.md#the-plan-and-ticket-pages).

Each read is one query (or a fixed few) whatever the number of tickets, so a
200-ticket plan renders in a bounded number of statements.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Q

from tracker.activity.filters import activity_visible
from tracker.models import ActivityEvent, Changeset, Claim, Dependency, Item, ItemKind, Project
from tracker.models.plan import RESOLVED_STATES, TICKET_STATES
from tracker.trust.permissions import Principal

BOARD_COLUMN_LIMIT = 50  # tickets shown per open column of the board
BOARD_RESOLVED_LIMIT = 10  # done and cancelled: the most recently numbered few
ACTIVITY_LIMIT = 20


@dataclass(frozen=True)
class TicketRow:
    """A ticket as the plan lists it: who holds it, what still blocks it, whether it is runnable."""

    item: Item
    claim: Claim | None = None
    blockers: tuple[str, ...] = ()
    runnable: bool = False


@dataclass
class EpicGroup:
    """An epic (None: "No epic") and its tickets as shown."""

    epic: Item | None
    tickets: list[TicketRow] = field(default_factory=list)


@dataclass
class MilestoneGroup:
    """A milestone (None: "No milestone") and its epics as shown."""

    milestone: Item | None
    epics: list[EpicGroup] = field(default_factory=list)

    @property
    def ticket_count(self) -> int:
        return sum(len(group.tickets) for group in self.epics)


def plan_tree(
    *, parents: Iterable[Item], tickets: Iterable[TicketRow], keep_empty: bool
) -> list[MilestoneGroup]:
    """Milestones → epics → tickets: a ticket under its epic, an epic under its milestone, a ticket
    without epic under its milestone's "No epic"; the groups without milestone last. ``keep_empty``:
    show the epics and milestones no shown ticket is in (an unfiltered plan)."""
    milestones = {p.pk: MilestoneGroup(p) for p in parents if p.kind == ItemKind.MILESTONE}
    orphans = MilestoneGroup(None)
    epics: dict[int | None, EpicGroup] = {}
    no_epic: dict[int | None, EpicGroup] = {}
    for epic in (p for p in parents if p.kind == ItemKind.EPIC):
        epics[epic.pk] = EpicGroup(epic)
        milestones.get(epic.milestone_id or 0, orphans).epics.append(epics[epic.pk])
    for row in tickets:
        ticket = row.item
        group = epics.get(ticket.epic_id) if ticket.epic_id else None
        if group is None:
            milestone_id = ticket.milestone_id if ticket.milestone_id in milestones else None
            group = no_epic.setdefault(milestone_id, EpicGroup(None))
        group.tickets.append(row)
    for milestone_id, group in no_epic.items():
        milestones.get(milestone_id or 0, orphans).epics.append(group)
    tree = [*milestones.values(), orphans]
    for milestone in tree:
        milestone.epics = [g for g in milestone.epics if keep_empty or g.tickets]
    return [m for m in tree if m.epics or (keep_empty and m.milestone is not None)]


@dataclass(frozen=True)
class BoardColumn:
    state: str
    tickets: list[TicketRow]
    total: int

    @property
    def more(self) -> int:
        return self.total - len(self.tickets)

    @property
    def label(self) -> str:
        return self.state.replace("_", " ")


def plan_board(*, tickets: Iterable[TicketRow]) -> list[BoardColumn]:
    """The tickets by state, one column per ticket state; the resolved columns hold the latest few."""
    by_state: dict[str, list[TicketRow]] = defaultdict(list)
    for row in tickets:
        if row.item.kind == ItemKind.TICKET:
            by_state[row.item.state].append(row)
    columns = []
    for state in TICKET_STATES:
        listed = by_state[state]
        if state in RESOLVED_STATES:
            shown = sorted(listed, key=lambda row: -row.item.number)[:BOARD_RESOLVED_LIMIT]
        else:
            shown = listed[:BOARD_COLUMN_LIMIT]
        columns.append(BoardColumn(state=state, tickets=shown, total=len(listed)))
    return columns


def open_blockers_by_item(*, project: Project) -> dict[int, list[str]]:
    """The keys of the unresolved blockers of every blocked item of ``project``, by item id, in one query."""
    rows = (
        Dependency.objects.filter(blocked__project=project)
        .exclude(blocker__state__in=RESOLVED_STATES)
        .values_list("blocked_id", "blocker__number")
        .order_by("blocker__number")
    )
    found: dict[int, list[str]] = defaultdict(list)
    for blocked_id, number in rows:
        found[blocked_id].append(f"{project.key}-{number}")
    return dict(found)


def activity_recent(*, user: Principal, project: Project, limit: int = ACTIVITY_LIMIT) -> list[ActivityEvent]:
    """The project's latest events ``user`` may see, newest first."""
    events = ActivityEvent.objects.filter(project=project).select_related("on_behalf_of")
    return list(activity_visible(events, user=user).order_by("-seq")[:limit])


def item_activity(*, user: Principal, item: Item, limit: int = 50) -> list[ActivityEvent]:
    """The events about ``item``, newest first: its own, dependencies naming it, questions about it."""
    key = item.key
    about = (
        Q(target=key)
        | Q(verb__startswith="dependency.", data__blocker=key)
        | Q(verb__startswith="question.", data__item=key)
    )
    events = ActivityEvent.objects.filter(about, project_id=item.project_id).select_related("on_behalf_of")
    return list(activity_visible(events, user=user).order_by("-seq")[:limit])


def item_changesets(*, item: Item, limit: int = 20) -> list[Changeset]:
    """The project's changesets whose operations name ``item`` (or that created it), newest first.

    A key is matched as a JSON string (``"BAL-9"``, quotes included), so ``BAL-9`` is not ``BAL-90``."""
    quoted = f'"{item.key}"'
    named = Q(operations__icontains=quoted) | Q(created_items__icontains=quoted)
    return list(
        Changeset.objects.filter(named, project_id=item.project_id)
        .select_related("proposed_by", "decided_by")
        .order_by("-number")[:limit]
    )
