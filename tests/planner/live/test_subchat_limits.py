"""Sub-chats within the limits of any turn (SPEC § 13.6, docs/domain.md#sub-chats): the project's
running-turn limit holds a sub-chat back until a turn ends, as the user's does
(test_subchat_waits.py), and the project's daily token budget ends a sub-chat's turn, which says so
to its parent."""

from __future__ import annotations

import json

import pytest

from planner.agent.messages import Usage
from planner.models import Event, HumanRequest, Session
from tests.fakes.scripted import Hang, call, say
from tests.planner.conftest import sync
from tests.planner.live.test_budget import USED_UP, metered, set_settings
from tests.planner.live.test_subchat_waits import both_answered, ends
from tests.planner.live.test_subchats import by_brief, children, run_through, start

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_subchat_past_the_projects_running_turn_limit_waits_and_starts_when_a_turn_ends(
    planner, model, session, member, limits
):
    limits(running_turns_per_project=1)
    hang = Hang("Working", then=say("A done."))
    model.add(start("Epic A", "Epic B"), hang, by_brief({"Epic B": say("B done.")}), say("Both ran."))
    await planner.send(session_id=session.pk, user=member, text="Replan.")
    await planner.wait(session.pk)
    await hang.started.wait()
    a, b = await children(session)
    held = await sync(Session.objects.get)(pk=b.pk)
    assert (held.state, held.turn_count) == ("idle", 0)  # waiting for the project's free turn
    assert await sync(HumanRequest.objects.filter(session=session, status="pending").count)() == 2

    ran, waited = await both_answered(planner, model, hang, session, a, b)
    assert (ran["answer"], waited["answer"]) == ("A done.", "B done.")
    assert await sync(ends)(session) == ["completed"]


async def test_a_subchat_past_the_daily_token_budget_fails_and_its_parent_hears_why(
    planner, model, session, member, owner, chat_project
):
    await sync(set_settings)(chat_project, owner, daily_token_budget=1000)
    await sync(metered)(chat_project, input_tokens=500, output_tokens=100)
    # The parent's call that starts the sub-chat spends the rest of the day's budget.
    spent = Usage(input_tokens=350, output_tokens=50)
    model.add(call("start_subchat", {"brief": "Replan epic A"}, usage=spent))
    await run_through(planner, session, member)

    (child,) = await children(session)
    assert len(model.requests) == 1  # neither the sub-chat nor the resumed parent reached the model
    child_end = await sync(lambda: Event.objects.filter(session=child, kind="turn_ended").get().data)()
    assert child_end == {"reason": "failed", "error": USED_UP}
    request = await sync(HumanRequest.objects.get)(session=session)
    told = json.loads(request.answer)  # what the parent's call returns
    assert (request.status, told["session"], told["outcome"]) == ("answered", str(child.pk), "failed")
    assert told["error"]["code"] == "subchat_failed"
    assert USED_UP in told["error"]["message"]
    parent_end = await sync(lambda: Event.objects.filter(session=session, kind="turn_ended").get().data)()
    assert parent_end == {"reason": "failed", "error": USED_UP}
