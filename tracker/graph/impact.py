"""What applying a proposed changeset would change in what can run (docs/domain.md#impact).

:func:`changeset_impact` takes the plan's graph now and as it would be with the changeset applied
(a trial of its operations, rolled back: ``changeset_trial``) and compares the two: the tickets
that become runnable or stop being runnable, those that gain an unresolved blocker or lose their
last one, and the longest remaining chain of blockers before and after.

A ticket the changeset would create has no key yet: in the graph after, it is named as the
changeset names it, ``$login`` (its ``ref``), or ``$#2`` (operation 2, which has no ref), and
marked ``new``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from tracker.errors import InvalidStateError
from tracker.graph.plan_graph import GraphNode, PlanGraph, project_graph
from tracker.models import Changeset
from tracker.models.plan import RESOLVED_STATES
from tracker.services.changesets import ApplyConflictError, changeset_trial


@dataclass(frozen=True)
class ImpactTicket:
    """A ticket named in an impact: its key (``$ref`` for a new one), title, and whether it is new."""

    key: str
    title: str
    new: bool = False


@dataclass(frozen=True)
class Impact:
    """What applying a changeset would change; ``unavailable`` says why there is nothing to show
    (the changeset is decided, or no longer applies), and then everything else is empty."""

    becomes_runnable: tuple[ImpactTicket, ...] = ()
    stops_runnable: tuple[ImpactTicket, ...] = ()
    becomes_blocked: tuple[ImpactTicket, ...] = ()
    unblocked: tuple[ImpactTicket, ...] = ()
    chain_before: tuple[ImpactTicket, ...] = ()
    chain_after: tuple[ImpactTicket, ...] = ()
    graph_before: PlanGraph | None = None
    graph_after: PlanGraph | None = None
    unavailable: str = ""

    @property
    def changes_runnable(self) -> bool:
        """Whether applying changes what can run or what is blocked at all."""
        return any((self.becomes_runnable, self.stops_runnable, self.becomes_blocked, self.unblocked))


def changeset_impact(*, changeset: Changeset) -> Impact:
    """The impact of applying ``changeset`` to the plan as it is now; nothing of the trial stays."""
    project = changeset.project
    try:
        before, after, created = changeset_trial(
            changeset=changeset, observe=lambda: project_graph(project=project)
        )
    except InvalidStateError as exc:
        return Impact(unavailable=exc.message)
    except ApplyConflictError as exc:
        return Impact(unavailable=f"This changeset no longer applies: {exc.message}")
    after = _name_new(after, {key: f"${ref}" for ref, key in created.items()})
    return compare(before, after)


def _name_new(graph: PlanGraph, names: dict[str, str]) -> PlanGraph:
    """The trial's keys of created items replaced by the changeset's names for them, marked new."""

    def name(key: str) -> str:
        return names.get(key, key)

    nodes = tuple(
        replace(node, key=names[node.key], new=True, claimed_by="") if node.key in names else node
        for node in graph.nodes
    )
    edges = tuple((name(blocker), name(blocked)) for blocker, blocked in graph.edges)
    return PlanGraph(nodes=nodes, edges=edges, chain=tuple(name(key) for key in graph.chain))


def _open(graph: PlanGraph) -> set[str]:
    """Tickets neither done nor cancelled."""
    return {node.key for node in graph.nodes if node.state not in RESOLVED_STATES}


def _blocked(graph: PlanGraph) -> set[str]:
    """Open tickets with at least one unresolved (open) blocker."""
    still_open = _open(graph)
    return {blocked for blocker, blocked in graph.edges if blocker in still_open and blocked in still_open}


def _tickets(graph: PlanGraph, keys: Iterable[str]) -> tuple[ImpactTicket, ...]:
    """``keys`` as tickets of ``graph``, in the graph's order (by number, new ones after)."""
    wanted = set(keys)
    return tuple(_ticket(node) for node in graph.nodes if node.key in wanted)


def _ticket(node: GraphNode) -> ImpactTicket:
    return ImpactTicket(key=node.key, title=node.title, new=node.new)


def _chain(graph: PlanGraph) -> tuple[ImpactTicket, ...]:
    by_key = {node.key: node for node in graph.nodes}
    return tuple(_ticket(by_key[key]) for key in graph.chain if key in by_key)


def compare(before: PlanGraph, after: PlanGraph) -> Impact:
    """The impact of going from the graph ``before`` to the graph ``after``."""
    runnable_before = {node.key for node in before.nodes if node.runnable}
    runnable_after = {node.key for node in after.nodes if node.runnable}
    blocked_before, blocked_after = _blocked(before), _blocked(after)
    return Impact(
        becomes_runnable=_tickets(after, runnable_after - runnable_before),
        stops_runnable=_tickets(before, runnable_before - runnable_after),
        becomes_blocked=_tickets(after, blocked_after - blocked_before),
        # A blocked ticket the changeset closes is not unblocked: it is no longer waiting at all.
        unblocked=_tickets(after, (blocked_before - blocked_after) & _open(after)),
        chain_before=_chain(before),
        chain_after=_chain(after),
        graph_before=before,
        graph_after=after,
    )
