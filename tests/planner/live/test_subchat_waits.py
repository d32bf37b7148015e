"""Sub-chats that wait (SPEC § 13.6, § 6.8; docs/domain.md#sub-chats): one whose process died
mid-turn is recovered and its parent told, by the sweep or by the daphne that opens it, and the
parent resumes with the failure as the call's result; one the running-turn limits hold back waits
for a free turn, fairly, instead of failing.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.utils import timezone

from planner.domain.selectors import work_waiting
from planner.domain.services import sessions
from planner.domain.services.subchat_waits import PROCESS_DIED, subchats_recovered, subchats_waiting
from planner.domain.services.subchats import first_message, subchat_request
from planner.live import subchats as live_subchats
from planner.live.runner import runner
from planner.models import Event, HumanRequest, Session
from planner.tasks import recover_dead_turns
from tests.fakes.scripted import Hang, ScriptedGateway, say
from tests.planner.conftest import open_socket, sync
from tests.planner.live.test_subchats import by_brief, children, first_text, results, start
from tracker.models import Membership

pytestmark = pytest.mark.django_db(transaction=True)


async def _nothing(*_args, **_kwargs):
    return False


async def paused_on_a_subchat(planner, model: ScriptedGateway, session, member, monkeypatch) -> Session:
    """The parent's turn paused on one ``start_subchat`` call whose sub-chat has not started: what a
    process that died right after the pause leaves behind."""
    monkeypatch.setattr(live_subchats, "start_round", _nothing)
    monkeypatch.setattr(live_subchats, "start_waiting", _nothing)
    model.add(start("Replan epic A"))
    await planner.send(session_id=session.pk, user=member, text="Replan every epic.")
    await planner.wait(session.pk)
    await planner.settle()
    monkeypatch.undo()
    (child,) = await children(session)
    return child


def die_mid_turn(child: Session, member) -> None:
    """What a process killed during the sub-chat's first turn leaves behind."""
    request = subchat_request(child)
    assert request is not None
    text = first_message(request.input)
    sessions.session_begin(session_id=child.pk, user=member, text=text, planner=True)
    Session.objects.filter(pk=child.pk).update(
        turn_owner="gone-host:4242:deadbeef", heartbeat_at=timezone.now() - timedelta(minutes=10)
    )


async def both_answered(planner, model: ScriptedGateway, hang: Hang, session, a, b) -> tuple[dict, dict]:
    """Release sub-chat ``a``'s hung turn; once ``a``, the ``b`` that waited for it and the parent
    have ended, the parent's two results (neither an error): the one that ran, the one that waited."""
    hang.release.set()
    for chat in (a, b, session):
        await planner.wait(chat.pk)
    await planner.settle()
    assert [first_text(r) for r in model.turn_requests[1:3]] == ["Epic A", "Epic B"]
    (ran, ran_error), (waited, waited_error) = results(model.turn_requests[-1])
    assert (ran_error, waited_error) == (False, False)
    return ran, waited


def ends(session) -> list[str]:
    rows = Event.objects.filter(session=session, kind="turn_ended").order_by("pk")
    return [e.data["reason"] for e in rows]


async def test_the_sweep_tells_a_dead_subchats_parent_which_resumes_with_the_failure(
    planner, model, session, member, monkeypatch
):
    child = await paused_on_a_subchat(planner, model, session, member, monkeypatch)
    await sync(die_mid_turn)(child, member)

    recovered = await sync(sessions.sessions_recover_dead)()
    assert [(r.session_id, r.parent_id) for r in recovered] == [(child.pk, session.pk)]
    (told,) = await sync(subchats_recovered)(recovered)
    assert (told.parent_id, told.resume_waiting) == (session.pk, True)
    assert [f["type"] for f in told.frames] == ["request_resolved"]
    request = await sync(HumanRequest.objects.get)(session=session)
    body = json.loads(request.answer)
    assert (request.status, body["outcome"]) == ("answered", "failed")
    assert body["error"]["code"] == "subchat_failed"
    assert PROCESS_DIED in body["error"]["message"]
    parent = await sync(Session.objects.get)(pk=session.pk)
    assert (parent.state, parent.resume_waiting) == ("paused", True)
    assert await sync(work_waiting)()
    assert await sync(subchats_recovered)(recovered) == []  # told once

    model.add(say("The sub-chat died; I replanned epic A myself."))
    assert await planner.start_waiting() == [session.pk]  # any process's next pass resumes it
    await planner.wait(session.pk)
    ((failed, is_error),) = results(model.turn_requests[-1])
    assert is_error
    assert (failed["session"], failed["outcome"]) == (str(child.pk), "failed")
    assert PROCESS_DIED in failed["error"]["message"]
    assert await sync(ends)(session) == ["completed"]
    assert await sync(ends)(child) == ["failed"]
    assert not await sync(work_waiting)()


async def test_a_parent_left_untold_by_a_process_that_died_is_told_by_the_next_sweep(
    planner, model, session, member, monkeypatch
):
    child = await paused_on_a_subchat(planner, model, session, member, monkeypatch)
    await sync(die_mid_turn)(child, member)
    # A daphne recovered the sub-chat, then died before telling its parent.
    assert await sync(sessions.session_recover_if_dead)(session_id=child.pk) is not None
    assert await sync(subchats_recovered)([]) != []  # the next sweep, with nothing to recover
    request = await sync(HumanRequest.objects.get)(session=session)
    body = json.loads(request.answer)
    assert (request.status, body["outcome"]) == ("answered", "failed")
    assert "process running this turn stopped" in body["error"]["message"]
    assert await sync(subchats_recovered)([]) == []
    model.add(say("Done without it."))
    assert await planner.start_waiting() == [session.pk]
    await planner.wait(session.pk)
    assert await sync(ends)(session) == ["completed"]


@pytest.mark.skipif(
    settings.PRODUCTION_MODE,
    reason="the task runs the hub on an event loop of its own, which in the test process would take "
    "the process's Redis relay; tests/e2e/test_subchat_processes.py runs it in a real worker",
)
def test_the_worker_sweep_resumes_the_parent_itself(scripted, session, member, monkeypatch):
    """The Celery sweep recovers the sub-chat, tells its parent and runs the parent's turn to its end."""
    child = async_to_sync(paused_on_a_subchat)(runner, scripted, session, member, monkeypatch)
    die_mid_turn(child, member)
    scripted.add(say("Done without it."))
    assert recover_dead_turns() == 1
    assert ends(session) == ["completed"]
    ((failed, is_error),) = results(scripted.turn_requests[-1])
    assert is_error
    assert PROCESS_DIED in failed["error"]["message"]


async def test_opening_a_dead_subchat_resumes_its_parent_here(planner, model, session, member, monkeypatch):
    child = await paused_on_a_subchat(planner, model, session, member, monkeypatch)
    await sync(die_mid_turn)(child, member)
    model.add(say("Done without it."))

    ws = await open_socket(child, member)  # a daphne opens the sub-chat: its watch recovers it
    await ws.disconnect()
    assert await sync(ends)(child) == ["failed"]
    await planner.wait(session.pk)
    await planner.settle()
    ((failed, is_error),) = results(model.turn_requests[-1])
    assert is_error
    assert PROCESS_DIED in failed["error"]["message"]
    assert await sync(ends)(session) == ["completed"]


async def test_a_subchat_its_parents_process_never_started_starts_with_the_next_pass(
    planner, model, session, member, monkeypatch
):
    child = await paused_on_a_subchat(planner, model, session, member, monkeypatch)
    assert await sync(work_waiting)()
    model.add(say("A done."), say("All done."))
    assert await planner.start_waiting() == [child.pk]
    await planner.wait(child.pk)
    await planner.wait(session.pk)
    await planner.settle()
    ((answered, is_error),) = results(model.turn_requests[-1])
    assert (answered["answer"], is_error) == ("A done.", False)
    assert await sync(ends)(session) == ["completed"]
    assert not await sync(work_waiting)()


async def test_a_subchat_past_the_running_turn_limits_waits_and_starts_when_a_turn_ends(
    planner, model, session, member, limits
):
    limits(running_turns_per_user=1)
    hang = Hang("Working", then=say("A done."))
    model.add(
        start("Epic A", "Epic B"),
        hang,
        by_brief({"Epic B": say("B done.")}),
        say("Both ran, one after the other."),
    )
    await planner.send(session_id=session.pk, user=member, text="Replan.")
    await planner.wait(session.pk)
    await hang.started.wait()
    a, b = await children(session)
    held = await sync(Session.objects.get)(pk=b.pk)
    assert (held.state, held.turn_count) == ("idle", 0)  # waiting, not failed
    assert await sync(subchats_waiting)() == [(b.pk, member.pk, session.project_id)]
    assert await sync(work_waiting)()
    pending = HumanRequest.objects.filter(session=session, status="pending")
    assert await sync(pending.count)() == 2

    ran, waited = await both_answered(planner, model, hang, session, a, b)  # A's end starts B
    assert ran["answer"] == "A done."
    assert (waited["answer"], waited["outcome"]) == ("B done.", "completed")
    assert await sync(ends)(session) == ["completed"]
    assert await sync(subchats_waiting)() == []


async def test_a_waiting_subchat_whose_owner_lost_access_fails_readably(
    planner, model, session, member, limits, chat_project
):
    limits(running_turns_per_user=1)
    hang = Hang("Working", then=say("A done."))
    model.add(start("Epic A", "Epic B"), hang, say("B could not start."))
    await planner.send(session_id=session.pk, user=member, text="Replan.")
    await planner.wait(session.pk)
    await hang.started.wait()
    a, b = await children(session)
    demoted = Membership.objects.filter(project=chat_project, user=member)
    await sync(demoted.update)(role="viewer")  # lacks planner.chat

    hang.release.set()
    await planner.wait(a.pk)
    await planner.wait(session.pk)
    await planner.settle()

    assert await sync(lambda: Session.objects.get(pk=b.pk).turn_count)() == 0  # never started
    (_, _), (refused, refused_error) = results(model.turn_requests[-1])
    assert refused_error
    assert refused["error"]["code"] == "subchat_failed"
    assert await sync(subchats_waiting)() == []


async def test_a_pass_never_starts_a_subchat_twice(planner, model, session, member, limits):
    limits(running_turns_per_user=1)
    hang = Hang("Working")
    model.add(start("Epic A", "Epic B"), hang)
    await planner.send(session_id=session.pk, user=member, text="Replan.")
    await planner.wait(session.pk)
    await hang.started.wait()
    a, _b = await children(session)
    assert await live_subchats.start_waiting(planner, a.pk) is False  # A runs: not started again
    assert await planner.start_waiting(force=True) == []  # B still held by the limit
    assert await planner.stop(session_id=session.pk, user=member) is True
    await planner.wait(a.pk)
    await planner.settle()
    assert await sync(subchats_waiting)() == []  # the stopped parent waits for nothing
