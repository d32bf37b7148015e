"""The runner's promises (docs/architecture.md): steering a dead turn never read is answered, steering
comes before anything sent after it however a turn ends, Stop stops a compaction, the announced end
of a turn is the stored one, and the seed's promises about compaction, change notes and requests."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from django.conf import settings

from planner.agent.calls import GatewayError
from planner.agent.messages import TextBlock, Usage
from planner.domain.selectors import work_waiting
from planner.domain.services import sessions
from planner.live import turn
from planner.live.hub import hub
from planner.live.runner import runner
from planner.models import Event, HumanRequest, Message, Session
from planner.tasks import recover_dead_turns
from tests.fakes.scripted import Answer, Hang, call, change_notes, say, tool_results
from tests.planner.conftest import drive, frames_until, open_socket, sync
from tests.planner.domain.test_requests import ASK, pause
from tests.planner.live.test_compaction_turns import compacted_events
from tests.planner.live.test_recovery import crash_mid_round
from tests.planner.live.test_turns import set_settings
from tracker.services.activity import Actor
from tracker.services.items import item_update
from tracker.services.projects import project_update

pytestmark = pytest.mark.django_db(transaction=True)

STILL_THERE = "Are you still there?"


@pytest.fixture
def compacting_session(chat_project, owner, member):
    """A session of a project whose context is compacted above 1,000 tokens."""
    values = {"compact_at_tokens": 1000, "compaction_model": "claude-summarizer"}
    project_update(actor=Actor(user=owner), project=chat_project, settings=values)
    return sessions.session_create(user=member, project=chat_project)


def crash_with_steering(session, user) -> None:
    """A turn whose process died after it accepted steering it never read."""
    crash_mid_round(session, user)
    Session.objects.filter(pk=session.pk).update(steering=[{"text": STILL_THERE, "author": user.username}])


def stored(session) -> list[tuple[str, str]]:
    """(kind, text of its first text block) of every message, in order."""
    rows = Message.objects.filter(session=session).order_by("seq")
    return [(m.kind, next((b["text"] for b in m.content if b.get("type") == "text"), "")) for m in rows]


def ends(session) -> list[str]:
    rows = Event.objects.filter(session=session, kind="turn_ended").order_by("pk")
    return [e.data["reason"] for e in rows]


def user_texts(request) -> list[str]:
    """The texts of the request's human-side text blocks, in order (change notes left out)."""
    return [
        b.text
        for m in request.messages
        if m.role == "user"
        for b in m.content
        if isinstance(b, TextBlock) and not b.text.startswith("<workspace-changes>")
    ]


# ---------------------------------------------------------------- answered after a restart


@pytest.mark.skipif(
    settings.PRODUCTION_MODE,
    reason="the task runs the hub on an event loop of its own, which in the test process would take "
    "the process's Redis relay from the tests after it; tests/e2e/test_processes.py runs it in a "
    "real worker",
)
def test_the_sweep_answers_steering_its_dead_turn_never_read(scripted, chat_project, member, session):
    crash_with_steering(session, member)
    scripted.add(say("Yes, still here."))
    assert recover_dead_turns() == 1  # the worker's sweep: it recovers, then answers, there
    assert ends(session) == ["failed", "completed"]
    assert stored(session)[-2:] == [("steer", STILL_THERE), ("assistant", "Yes, still here.")]
    assert user_texts(scripted.turn_requests[-1])[-1] == STILL_THERE
    refreshed = Session.objects.get(pk=session.pk)
    assert (refreshed.state, refreshed.answer_waiting, refreshed.steering) == ("idle", False, [])
    assert not work_waiting()


async def test_what_waits_after_a_recovery_is_started_by_the_next_pass(
    planner, model, chat_project, member, session
):
    """The worker's pass (and a turn's end) starts an answer nobody started yet."""
    await sync(crash_with_steering)(session, member)
    (recovered,) = await sync(sessions.sessions_recover_dead)()
    assert recovered.answer_waiting
    assert await sync(work_waiting)()
    model.add(say("Yes, still here."))
    assert await planner.start_waiting() == [session.pk]
    await planner.wait(session.pk)
    assert await sync(ends)(session) == ["failed", "completed"]
    assert (await sync(stored)(session))[-2:] == [("steer", STILL_THERE), ("assistant", "Yes, still here.")]
    assert not await sync(work_waiting)()


async def test_opening_a_dead_session_answers_its_steering_and_the_page_sees_it(
    scripted, chat_project, member, session
):
    await sync(crash_with_steering)(session, member)
    scripted.add(say("Yes, still here."))
    ws = await open_socket(session, member)  # the page reconnects: its watch recovers the session
    seen = await frames_until(ws, "turn_ended")
    await ws.disconnect()
    assert seen[-1]["reason"] == "completed"
    assert "".join(f["text"] for f in seen if f["type"] == "text_delta") == "Yes, still here."
    assert await sync(ends)(session) == ["failed", "completed"]
    assert (await sync(stored)(session))[-2:] == [("steer", STILL_THERE), ("assistant", "Yes, still here.")]


async def test_a_watcher_sees_the_steering_a_recovery_stored_then_its_answer(
    scripted, chat_project, member, session
):
    ws = await open_socket(session, member)  # watching before the turn dies
    await sync(crash_with_steering)(session, member)
    scripted.add(say("Yes, still here."))
    assert await runner.recover(session.pk) is True
    recovered = await frames_until(ws, "turn_ended")
    assert [(f["type"], f.get("kind")) for f in recovered] == [
        ("user_message", "steer"),
        ("turn_ended", None),
    ]
    assert (recovered[0]["text"], recovered[-1]["reason"]) == (STILL_THERE, "failed")
    answered = await frames_until(ws, "turn_ended")
    await runner.wait(session.pk)
    await ws.disconnect()
    assert answered[0]["type"] == "turn_started"
    assert answered[-1]["reason"] == "completed"


async def test_a_message_after_the_recovery_is_answered_with_the_steering_in_one_turn(
    planner, model, chat_project, member, session
):
    await sync(crash_with_steering)(session, member)
    (recovered,) = await sync(sessions.sessions_recover_dead)()
    assert recovered.answer_waiting
    model.add(say("Here, and on it."))
    begin = await drive(planner, session, member, "Hello?")
    assert begin.meaning == "started"
    assert user_texts(model.turn_requests[-1])[-2:] == [STILL_THERE, "Hello?"]
    assert await sync(sessions.follow_up_start)(session_id=session.pk) is None  # nothing waits any more
    assert not await sync(work_waiting)()
    assert len(model.turn_requests) == 1


async def test_stopping_a_dead_turn_keeps_its_steering_and_starts_nothing(
    planner, model, chat_project, member, session
):
    await sync(crash_with_steering)(session, member)
    assert await planner.stop(session_id=session.pk, user=member) is False  # nothing ran: recovered
    assert (await sync(stored)(session))[-1] == ("steer", STILL_THERE)
    assert not await sync(work_waiting)()
    assert model.requests == []


async def test_an_answer_held_by_the_running_turn_limit_starts_when_a_turn_frees_up(
    planner, model, chat_project, member, session, limits
):
    other = await sync(sessions.session_create)(user=member, project=chat_project)
    hang = Hang(then=say("Done elsewhere."))
    model.add(hang)
    await planner.send(session_id=other.pk, user=member, text="Busy")
    await hang.started.wait()
    await sync(crash_with_steering)(session, member)
    limits(running_turns_per_user=1)  # the other turn takes the member's only one
    assert await planner.recover(session.pk) is True
    assert await sync(lambda: Session.objects.get(pk=session.pk).answer_waiting)()  # held, waiting
    model.add(say("Yes, still here."))
    hang.release.set()
    await planner.wait(other.pk)  # its end starts what waits
    await planner.wait(session.pk)
    assert await sync(ends)(session) == ["failed", "completed"]


# ---------------------------------------------------------------- steering in order


async def steer_then(planner, model, session, member, first: Hang) -> None:
    """Start a turn on ``first``, and steer it while its model call runs."""
    model.add(first)
    await planner.send(session_id=session.pk, user=member, text="Plan the beta")
    await first.started.wait()
    begin = await planner.send(session_id=session.pk, user=member, text="Mind the holidays")
    assert begin.meaning == "steered"


async def test_steering_before_a_stop_comes_before_the_next_message(planner, model, session, member):
    await steer_then(planner, model, session, member, Hang(text="Thinking"))
    await planner.stop(session_id=session.pk, user=member)
    await planner.wait(session.pk)
    assert await sync(ends)(session) == ["stopped"]
    model.add(say("Noted."))
    await drive(planner, session, member, "Next")
    assert user_texts(model.turn_requests[-1]) == ["Plan the beta", "Mind the holidays", "Next"]


async def test_steering_before_a_failure_comes_before_the_next_message(planner, model, session, member):
    hang = Hang(then=Answer(text="A very long", stop_reason="max_tokens"))  # cut off: the turn fails
    await steer_then(planner, model, session, member, hang)
    hang.release.set()
    await planner.wait(session.pk)
    assert await sync(ends)(session) == ["failed"]
    model.add(say("Noted."))
    await drive(planner, session, member, "Next")
    assert user_texts(model.turn_requests[-1]) == ["Plan the beta", "Mind the holidays", "Next"]


async def test_steering_before_max_rounds_comes_before_the_continuation(
    planner, model, session, member, owner, chat_project
):
    await set_settings(chat_project, owner, max_rounds=1)
    hang = Hang(then=call("list_items"))
    await steer_then(planner, model, session, member, hang)
    hang.release.set()
    await planner.wait(session.pk)
    assert await sync(ends)(session) == ["max_rounds"]
    model.add(say("Noted."))
    await drive(planner, session, member, "Go on")
    texts = user_texts(model.turn_requests[-1])
    assert texts[-2:] == ["Mind the holidays", "Go on"]


# ---------------------------------------------------------------- one truth


async def test_a_turn_steered_at_every_end_announces_what_it_stores(
    planner, model, session, member, monkeypatch
):
    """A completed turn goes on while steering waits at its end, at most MAX_RESTARTS times; the
    last end is stored as announced, with the steering it never read, not left running."""
    real_end = sessions.turn_end

    def steered_end(**kwargs):
        Session.objects.filter(pk=kwargs["session_id"]).update(
            steering=[{"text": "One more thing", "author": member.username}]
        )  # a message that slips in after every last save
        return real_end(**kwargs)

    monkeypatch.setattr(sessions, "turn_end", steered_end)
    model.add(*[say("") for _ in range(turn.MAX_RESTARTS)])  # empty answers: nothing saved, no end
    ws = await open_socket(session, member)
    await planner.send(session_id=session.pk, user=member, text="Hi")
    seen = await frames_until(ws, "turn_ended", limit=400)
    await planner.wait(session.pk)
    await ws.disconnect()
    assert seen[-1]["reason"] == "completed"
    refreshed = await sync(Session.objects.get)(pk=session.pk)
    assert (refreshed.state, refreshed.turn_owner, refreshed.steering) == ("idle", "", [])
    assert await sync(ends)(session) == ["completed"]
    assert (await sync(stored)(session))[-1] == ("steer", "One more thing")
    assert hub.turns.get(session.pk) is None


# ---------------------------------------------------------------- Stop stops a compaction


async def test_stop_cancels_a_compaction_at_once(planner, model, compacting_session, member):
    session = compacting_session
    model.add(say("A1", usage=Usage(input_tokens=5000)))
    await drive(planner, session, member, "Q1")
    summary = Hang()
    model.add(summary)
    await planner.send(session_id=session.pk, user=member, text="Q2")
    await asyncio.wait_for(summary.started.wait(), 5)
    assert model.requests[-1].purpose == "compaction"
    assert await planner.stop(session_id=session.pk, user=member) is True
    await asyncio.wait_for(planner.wait(session.pk), 5)  # at once: not when the summary would end
    assert await sync(ends)(session) == ["completed", "stopped"]
    assert await compacted_events(session) == []
    refreshed = await sync(Session.objects.get)(pk=session.pk)
    assert (refreshed.state, refreshed.summary) == ("idle", "")
    assert [r.purpose for r in model.requests] == ["turn", "compaction"]  # no turn call after it
    model.add(say("A2"))
    await drive(planner, session, member, "Q3")  # the history stayed valid (the model checks it)


# ---------------------------------------------------------------- seed promises


async def test_a_compaction_reaches_every_watcher_as_a_compacted_frame(scripted, compacting_session, member):
    session = compacting_session
    scripted.add(say("A1", usage=Usage(input_tokens=5000)))
    ws = await open_socket(session, member)
    await ws.send_json_to({"type": "message", "text": "Q1"})
    await frames_until(ws, "turn_ended")
    other = await open_socket(session, member)
    scripted.add(say("S1"), say("A2"))
    await ws.send_json_to({"type": "message", "text": "Q2"})
    for socket in (ws, other):
        seen = await frames_until(socket, "turn_ended")
        (compacted,) = [f for f in seen if f["type"] == "compacted"]
        assert compacted["up_to"] == 2
        assert compacted["estimated_tokens"] > 1000
        await socket.disconnect()


async def test_a_failed_compaction_is_logged_and_the_call_goes_on_uncompacted(
    planner, model, compacting_session, member, caplog
):
    session = compacting_session
    model.add(say("A1", usage=Usage(input_tokens=5000)))
    await drive(planner, session, member, "Q1")
    model.add(GatewayError("server", "The Anthropic API failed: overloaded"), say("A2"))
    with caplog.at_level(logging.WARNING, logger="planner.agent.loop"):
        await drive(planner, session, member, "Q2")
    logged = [r.getMessage() for r in caplog.records if r.name == "planner.agent.loop"]
    assert logged == ["compaction failed, going on uncompacted: The Anthropic API failed: overloaded"]
    assert [m.text for m in model.turn_requests[-1].messages] == ["Q1", "A1", "Q2"]
    assert await sync(ends)(session) == ["completed", "completed"]


async def test_change_notes_arrive_between_rounds_of_a_turn(
    planner, model, session, member, owner, make_item
):
    item = await sync(make_item)(title="Login page")
    model.add(say("Seen."))
    await drive(planner, session, member, "Hello")  # the item's creation is noted here
    first = Hang(then=call("list_items", {"kind": "ticket"}))
    model.add(first, say("Renamed, I see."))
    await planner.send(session_id=session.pk, user=member, text="Watch the login page")
    await first.started.wait()
    await sync(item_update)(actor=Actor(user=owner), item=item, fields={"title": "Sign-in page"})
    first.release.set()
    await planner.wait(session.pk)
    requests = model.turn_requests[-2:]
    assert change_notes(requests[0]) == change_notes(model.turn_requests[0])  # nothing new yet
    (note,) = [n for n in change_notes(requests[1]) if n not in change_notes(requests[0])]
    assert f'"{item.key}" updated by "user:owner"' in note
    last = requests[1].messages
    assert [m.kind for m in last[-2:]] == ["tool_results", "changes"]  # after the round, before the call


async def test_a_paused_turn_resumes_only_once_every_request_is_answered(planner, model, session, member):
    second = ("ask_human", {"question": "Who demos it?"})
    first = await pause(planner, session, member, call(*ASK, second))
    pending = await sync(
        lambda: list(HumanRequest.objects.filter(session=session, status="pending").order_by("created_at"))
    )()
    assert [r.question for r in pending] == [ASK[1]["question"], "Who demos it?"]
    resolution = await planner.reply(session_id=session.pk, user=member, request=str(first.pk), text="Monday")
    assert resolution.begin is None
    assert await sync(lambda: Session.objects.get(pk=session.pk).state)() == "paused"
    assert len(model.turn_requests) == 1  # not resumed: one request still pending
    model.add(say("Monday, with Ana."))
    await planner.reply(session_id=session.pk, user=member, request=str(pending[1].pk), text="Ana")
    await planner.wait(session.pk)
    results = tool_results(model.turn_requests[-1])
    assert [json.loads(r.content)["answer"] for r in results] == ["Monday", "Ana"]
    assert await sync(ends)(session) == ["completed"]
