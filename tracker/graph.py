"""The plan's dependency graph as data: its tickets, what blocks what, and the longest chain of
blockers still to do (docs/domain.md#the-dependency-graph).

The picture of it is drawn by ``tracker.graph_svg``; a changeset's impact compares two of these
(the plan now, and as it would be once applied).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GraphNode:
    """One ticket. ``new``: it does not exist yet (a proposed changeset would create it), so it has
    no page to link to. ``claimed_by``: the label of whoever holds its active claim, if anyone."""

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
