"""The dependency graph as data (docs/domain.md#the-dependency-graph): the project's tickets with
their states, what blocks what, and the longest chain of blockers still to do."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tracker.graph.plan_graph import GraphNode, longest_chain, project_graph
from tracker.services.activity import Actor
from tracker.services.items import dependency_add
from tracker.services.work import claim_take


def node(key: str, state: str = "ready") -> GraphNode:
    return GraphNode(key=key, title=key, state=state, runnable=False)


def test_the_longest_chain_follows_the_blockers_first_blocker_first():
    nodes = [node(k) for k in "ABCDE"]
    edges = [("A", "B"), ("B", "C"), ("D", "C"), ("C", "E")]

    assert longest_chain(nodes, edges) == ("A", "B", "C", "E")


def test_done_and_cancelled_tickets_are_no_part_of_the_chain():
    nodes = [node("A", "done"), node("B"), node("C"), node("D", "cancelled")]
    edges = [("A", "B"), ("B", "C"), ("C", "D")]

    assert longest_chain(nodes, edges) == ("B", "C")


def test_no_chain_when_no_open_ticket_blocks_another():
    assert longest_chain([node("A"), node("B")], []) == ()
    assert longest_chain([node("A", "done"), node("B")], [("A", "B")]) == ()


def test_of_equally_long_chains_the_first_tickets_win():
    nodes = [node(k) for k in "ABCD"]

    assert longest_chain(nodes, [("C", "D"), ("A", "B")]) == ("A", "B")
    assert longest_chain(nodes, [("A", "B"), ("A", "C")]) == ("A", "B")


def test_a_cycle_is_left_out_instead_of_looped_on():
    nodes = [node(k) for k in "ABCDE"]
    edges = [("A", "B"), ("B", "A"), ("C", "D"), ("D", "E")]

    assert longest_chain(nodes, edges) == ("C", "D", "E")


@pytest.mark.django_db
def test_the_project_graph_holds_tickets_dependencies_states_and_claims(project, owner, member, make_item):
    epic = make_item(kind="epic", title="Epic")
    first = make_item(title="Schema", state="done")
    second = make_item(title="API", state="ready")
    third = make_item(title="Page", state="ready")
    fourth = make_item(title="Docs", state="ready")
    actor = Actor(user=owner)
    dependency_add(actor=actor, blocker=first, blocked=second)
    dependency_add(actor=actor, blocker=second, blocked=third)
    dependency_add(actor=actor, blocker=epic, blocked=third)  # an epic is not drawn
    claim_take(actor=Actor(user=member), project=project, item=fourth)

    graph = project_graph(project=project)

    assert [(n.key, n.title, n.state, n.runnable, n.claimed_by) for n in graph.nodes] == [
        (first.key, "Schema", "done", False, ""),
        (second.key, "API", "ready", True, ""),
        (third.key, "Page", "ready", False, ""),
        (fourth.key, "Docs", "in_progress", False, "member"),
    ]
    assert graph.edges == ((first.key, second.key), (second.key, third.key))
    assert graph.chain == (second.key, third.key)


@pytest.mark.django_db
def test_the_project_graph_reads_the_same_queries_whatever_the_plans_size(project, owner, make_item):
    def grow(count: int) -> None:
        previous = None
        for n in range(count):
            ticket = make_item(title=f"Ticket {n}", state="ready")
            if previous is not None:
                dependency_add(actor=Actor(user=owner), blocker=previous, blocked=ticket)
            previous = ticket

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            project_graph(project=project)
        return len(captured)

    grow(3)
    small = queries()
    grow(30)

    assert queries() == small
    assert len(project_graph(project=project).chain) == 30
