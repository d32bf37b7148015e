"""The runnable query: ready tickets whose blockers are all done or cancelled."""

from __future__ import annotations

from tracker.models import Dependency
from tracker.selectors import runnable_tickets


def keys(project) -> list[str]:
    return [item.key for item in runnable_tickets(project=project)]


def test_runnable_on_a_plan_with_chains_cancelled_and_done_blockers(project, make_item):
    done = make_item(title="Done blocker", state="done")
    cancelled = make_item(title="Cancelled blocker", state="cancelled")
    in_progress = make_item(title="Busy blocker", state="in_progress")
    free = make_item(title="Free", state="ready")
    after_done = make_item(title="After done", state="ready")
    after_cancelled = make_item(title="After cancelled", state="ready")
    after_busy = make_item(title="After busy", state="ready")
    chain_head = make_item(title="Chain head", state="ready")
    chain_middle = make_item(title="Chain middle", state="ready")
    chain_tail = make_item(title="Chain tail", state="ready")
    mixed = make_item(title="Mixed blockers", state="ready")
    draft = make_item(title="Draft", state="draft")
    for blocker, blocked in [
        (done, after_done),
        (cancelled, after_cancelled),
        (in_progress, after_busy),
        (chain_head, chain_middle),
        (chain_middle, chain_tail),
        (done, mixed),
        (chain_tail, mixed),
    ]:
        Dependency.objects.create(blocker=blocker, blocked=blocked)
    assert keys(project) == [free.key, after_done.key, after_cancelled.key, chain_head.key]
    assert draft.key not in keys(project)


def test_finishing_a_chain_link_unblocks_the_next(project, make_item):
    head = make_item(title="Head", state="ready")
    tail = make_item(title="Tail", state="ready")
    Dependency.objects.create(blocker=head, blocked=tail)
    assert keys(project) == [head.key]
    head.state = "done"
    head.save()
    assert keys(project) == [tail.key]


def test_epics_and_milestones_are_never_runnable(project, make_item):
    make_item(kind="epic", title="Epic", state="open")
    make_item(kind="milestone", title="M", state="open")
    assert keys(project) == []


def test_runnable_is_per_project(project, other_project, make_item):
    make_item(title="Elsewhere", state="ready", target=other_project)
    assert keys(project) == []
