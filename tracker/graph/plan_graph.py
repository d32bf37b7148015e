"""The plan's dependency graph as data: its tickets, what blocks what, and the longest chain of
blockers still to do (docs/domain.md#the-dependency-graph).

The picture of it is drawn by ``tracker.graph.svg``; a changeset's impact compares two of these
(the plan now, and as it would be once applied).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.utils import timezone

from tracker.models import Claim, Dependency, Item, ItemKind, Project
from tracker.models.plan import RESOLVED_STATES
from tracker.selectors import held, runnable_tickets


@dataclass(frozen=True)
class GraphNode:
    """One ticket. ``new``: it does not exist yet (a proposed changeset would create it), so it has
    no page to link to. ``claimed_by``: the label of whoever holds it under a claim whose lease has
    not run out, if anyone."""

    key: str
    title: str
    state: str
    runnable: bool
    claimed_by: str = ""
    new: bool = False


@dataclass(frozen=True)
class PlanGraph:
    """The tickets (by number), the dependencies between them as ``(blocker key, blocked key)``,
    and ``chain``: the longest remaining chain of blockers, first blocker first."""

    nodes: tuple[GraphNode, ...]
    edges: tuple[tuple[str, str], ...]
    chain: tuple[str, ...] = ()


def project_graph(*, project: Project) -> PlanGraph:
    """The tickets of ``project`` and the dependencies between them, in four queries whatever the
    plan's size; dependencies that involve an epic or a milestone are not drawn."""
    tickets = list(
        Item.objects.filter(project=project, kind=ItemKind.TICKET)
        .order_by("number")
        .values_list("pk", "number", "title", "state")
    )
    runnable = set(runnable_tickets(project=project).values_list("pk", flat=True))
    holders = dict(
        Claim.objects.filter(held(timezone.now()), project=project).values_list("item_id", "holder__username")
    )
    nodes = tuple(
        GraphNode(
            key=f"{project.key}-{number}",
            title=title,
            state=state,
            runnable=pk in runnable,
            claimed_by=holders.get(pk, ""),
        )
        for pk, number, title, state in tickets
    )
    pairs = Dependency.objects.filter(
        blocker__project=project, blocker__kind=ItemKind.TICKET, blocked__kind=ItemKind.TICKET
    ).order_by("blocker__number", "blocked__number")
    edges = tuple(
        (f"{project.key}-{blocker}", f"{project.key}-{blocked}")
        for blocker, blocked in pairs.values_list("blocker__number", "blocked__number")
    )
    return PlanGraph(nodes=nodes, edges=edges, chain=longest_chain(nodes, edges))


def longest_chain(nodes: Sequence[GraphNode], edges: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """The longest path of blockers among the tickets not done or cancelled, first blocker first:
    the work that must happen one piece after another. Of equally long chains, the one whose
    tickets come first in ``nodes``; no chain (``()``) when no open ticket blocks another. Tickets
    caught in a cycle (which the plan's validation refuses) are left out rather than looped on."""
    order = {node.key: index for index, node in enumerate(nodes) if node.state not in RESOLVED_STATES}
    blocks: dict[str, list[str]] = {key: [] for key in order}
    waiting = dict.fromkeys(order, 0)
    for blocker, blocked in edges:
        if blocker in order and blocked in order and blocker != blocked:
            blocks[blocker].append(blocked)
            waiting[blocked] += 1
    placed = _topological(blocks, waiting, order)
    # The longest chain starting at each ticket, from the last placed back to the first.
    length: dict[str, int] = {}
    best_next: dict[str, str] = {}
    for key in reversed(placed):
        length[key] = 1
        for after in sorted(blocks[key], key=order.__getitem__):
            if after in length and length[after] + 1 > length[key]:
                length[key], best_next[key] = length[after] + 1, after
    if not length or max(length.values()) < 2:
        return ()
    start = min(length, key=lambda key: (-length[key], order[key]))
    chain = [start]
    while chain[-1] in best_next:
        chain.append(best_next[chain[-1]])
    return tuple(chain)


def _topological(blocks: dict[str, list[str]], waiting: dict[str, int], order: dict[str, int]) -> list[str]:
    """Kahn's order: a ticket is placed once every blocker before it is; a cycle's never are."""
    ready = sorted((key for key, count in waiting.items() if count == 0), key=order.__getitem__)
    placed: list[str] = []
    while ready:
        key = ready.pop(0)
        placed.append(key)
        for after in blocks[key]:
            waiting[after] -= 1
            if waiting[after] == 0:
                ready.append(after)
    return placed
