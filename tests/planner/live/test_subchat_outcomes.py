"""How a sub-chat's end reads to its parent (SPEC § 13.6, docs/domain.md#sub-chats): one its human
stopped says so; one that asks its human for an approval holds its parent until they decide, and
runs the tool as them; and the parent's prompt says when splitting helps, the sub-chat's that it
is one."""

from __future__ import annotations

import pytest

from planner.models import HumanRequest, Session
from tests.fakes.scripted import Hang, call, say
from tests.planner.conftest import sync
from tests.planner.live.test_subchat_waits import ends
from tests.planner.live.test_subchats import PROPOSE, children, first_text, results, run_through, start
from tracker.models import Changeset
from tracker.services.activity import Actor
from tracker.services.projects import project_update

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_subchat_its_human_stopped_tells_its_parent_so(planner, model, session, member):
    hang = Hang("Reading the epic")
    model.add(start("Replan epic A"), hang, say("A was stopped; I will do it here."))
    await planner.send(session_id=session.pk, user=member, text="Replan.")
    await planner.wait(session.pk)
    await hang.started.wait()
    (child,) = await children(session)

    assert await planner.stop(session_id=child.pk, user=member) is True  # in the sub-chat itself
    await planner.wait(child.pk)
    await planner.wait(session.pk)
    await planner.settle()

    ((stopped, is_error),) = results(model.turn_requests[-1])
    assert is_error
    assert (stopped["session"], stopped["outcome"]) == (str(child.pk), "stopped")
    assert stopped["error"]["code"] == "subchat_stopped"
    assert await sync(ends)(child) == ["stopped"]
    assert await sync(ends)(session) == ["completed"]  # the parent went on


async def test_a_subchats_approval_holds_its_parent_until_the_human_decides(
    planner, model, chat_project, owner, session, member
):
    settings = {"approve_tools": ["propose_changeset"]}
    await sync(project_update)(actor=Actor(user=owner), project=chat_project, settings=settings)
    model.add(start("Replan epic B"), call(*PROPOSE))
    await planner.send(session_id=session.pk, user=member, text="Replan.")
    await planner.wait(session.pk)
    (child,) = await children(session)
    await planner.wait(child.pk)
    await planner.settle()

    approval = await sync(HumanRequest.objects.get)(session=child)
    assert (approval.kind, approval.status) == ("approval", "pending")
    states = await sync(lambda: dict(Session.objects.values_list("pk", "state")))()
    assert (states[session.pk], states[child.pk]) == ("paused", "paused")  # the parent still waits
    assert await sync(Changeset.objects.count)() == 0

    model.add(say("B: proposed."), say("Replanned."))
    await planner.reply(session_id=child.pk, user=member, request=str(approval.pk), approve=True)
    await planner.wait(child.pk)
    await planner.wait(session.pk)
    await planner.settle()

    proposed = await sync(Changeset.objects.get)()
    assert (proposed.proposed_by_id, proposed.planner_session) == (
        member.pk,
        child.pk,
    )  # ran as the sub-chat's human
    ((answered, is_error),) = results(model.turn_requests[-1])
    assert (answered["answer"], answered["changesets"], is_error) == (
        "B: proposed.",
        [proposed.number],
        False,
    )


async def test_the_parents_prompt_says_when_to_split_and_the_subchats_that_it_is_one(
    planner, model, session, member
):
    model.add(start("Replan epic A"), say("A done."), say("Done."))
    await run_through(planner, session, member)

    parent_call, child_call = model.turn_requests[0], model.turn_requests[1]
    assert first_text(child_call) == "Replan epic A"
    assert "## When to split the work" in parent_call.system
    assert "This chat is a sub-chat" not in parent_call.system
    assert "This chat is a sub-chat" in child_call.system
