"""Taking back a steering message before the planner reads it (the chat's ↑ in an empty box).

A message sent while a turn runs waits in the session's steering queue until the model's
next call. Its owner may retract the last one still waiting: it leaves the queue, the model
never sees it, every watcher is told (``steer_retracted``) and the text comes back to edit.
Once delivered, or with nothing queued, the retract is refused and nothing changes.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from contextlib import contextmanager

import pytest
from django.conf import settings

from planner.domain.services import agent_questions, sessions
from planner.domain.services.chats import session_rename
from planner.domain.services.sessions import NotQueuedError, steering_retract
from planner.domain.transcripts import transcript
from planner.live.hub import hub
from planner.live.runner import Runner, runner
from planner.models import Message, Session
from tests.fakes.scripted import Hang, call, say
from tests.planner.conftest import eventually, frames_until, open_socket, sync
from tracker.errors import NotFoundError, PermissionDeniedError
from tracker.services.activity import Actor
from tracker.services.projects import membership_set

pytestmark = pytest.mark.django_db(transaction=True)


def queued(session) -> list[str]:
    return [item["text"] for item in Session.objects.get(pk=session.pk).steering]


def texts_sent(model) -> list[str]:
    """Every text the model was ever sent, in any request."""
    return [m.text for r in model.turn_requests for m in r.messages]


async def stored(session) -> list[tuple[str, str]]:
    def read():
        rows = Message.objects.filter(session=session).order_by("seq")
        return [(m.kind, "".join(b.get("text", "") for b in m.content)) for m in rows]

    return await sync(read)()


async def running_with_steering(planner, model, session, user, *steering: str, then=None) -> Hang:
    """A turn hanging in its first model call, with ``steering`` queued behind it."""
    hang = Hang(text="Checking", then=then or call("list_items"))
    model.add(hang)
    await planner.send(session_id=session.pk, user=user, text="What is planned?")
    await hang.started.wait()
    for text in steering:
        assert (await planner.send(session_id=session.pk, user=user, text=text)).meaning == "steered"
    return hang


# ---------------------------------------------------------------- the service and the runner


async def test_the_owner_takes_back_the_last_queued_message_and_the_model_never_reads_it(
    planner, model, session, member
):
    hang = await running_with_steering(
        planner, model, session, member, "Only epics, please", "And the risks?"
    )
    assert await planner.retract(session_id=session.pk, user=member) == "And the risks?"
    assert await sync(queued)(session) == ["Only epics, please"]
    model.add(say("Noted: only epics."))
    hang.release.set()
    await planner.wait(session.pk)
    assert model.turn_requests[1].messages[-1].text == "Only epics, please"
    assert "And the risks?" not in texts_sent(model)
    assert [kind for kind, _ in await stored(session)] == [
        "human",
        "assistant",
        "tool_results",
        "steer",
        "assistant",
    ]
    assert ("steer", "And the risks?") not in await stored(session)


async def test_the_transcript_shows_the_queued_messages_until_the_planner_reads_them(
    planner, model, session, member
):
    """A reloaded page shows them queued, and ↑ still takes the last one back."""

    def shown() -> list[str]:
        return transcript(session=Session.objects.get(pk=session.pk))["queued"]

    hang = await running_with_steering(
        planner, model, session, member, "Only epics, please", "And the risks?"
    )
    assert await sync(shown)() == ["Only epics, please", "And the risks?"]
    await planner.retract(session_id=session.pk, user=member)
    assert await sync(shown)() == ["Only epics, please"]
    model.add(say("Noted: only epics."))
    hang.release.set()
    await planner.wait(session.pk)
    assert await sync(shown)() == []


async def test_taking_back_every_queued_message_leaves_the_turn_to_end_with_its_answer(
    planner, model, session, member
):
    hang = await running_with_steering(
        planner, model, session, member, "And the risks?", then=say("All done.")
    )
    assert await planner.retract(session_id=session.pk, user=member) == "And the risks?"
    hang.release.set()
    await planner.wait(session.pk)  # the script has no second answer: a second call would fail the turn
    assert len(model.turn_requests) == 1
    assert await stored(session) == [("human", "What is planned?"), ("assistant", "All done.")]
    row = await sync(Session.objects.get)(pk=session.pk)
    assert (row.state, row.steering) == ("idle", [])
    last = await sync(lambda: list(row.events.filter(kind="turn_ended").values_list("data", flat=True)))()
    assert last == [{"reason": "completed"}]


async def test_a_message_taken_back_between_the_answer_and_its_delivery_ends_the_turn_cleanly(
    planner, model, session, member, monkeypatch
):
    """The last answer's save saw the steering waiting (so the turn went on for it), and its
    author took it back before the turn read it: the turn ends without another model call."""
    hang = await running_with_steering(
        planner, model, session, member, "And the risks?", then=say("All done.")
    )
    deliver = sessions.session_inputs
    taken: list[str] = []

    def retract_first(**kwargs):
        if not taken:
            taken.append(steering_retract(session_id=session.pk, user=member))
        return deliver(**kwargs)

    monkeypatch.setattr(sessions, "session_inputs", retract_first)
    hang.release.set()
    await planner.wait(session.pk)
    assert taken == ["And the risks?"]
    assert len(model.turn_requests) == 1
    row = await sync(Session.objects.get)(pk=session.pk)
    assert (row.state, row.steering) == ("idle", [])
    assert await stored(session) == [("human", "What is planned?"), ("assistant", "All done.")]


async def test_a_delivered_message_cannot_be_taken_back_and_nothing_is_lost(planner, model, session, member):
    hang = await running_with_steering(planner, model, session, member, "Only epics, please")
    model.add(say("Noted: only epics."))
    hang.release.set()
    await planner.wait(session.pk)
    with pytest.raises(NotQueuedError) as refused:
        await planner.retract(session_id=session.pk, user=member)
    assert refused.value.code == "not_queued"
    assert "already read" in refused.value.message
    assert ("steer", "Only epics, please") in await stored(session)
    assert model.turn_requests[1].messages[-1].text == "Only epics, please"


@contextmanager
def running_here(session):
    """The session's turn counts as running in this process (no task needed to steer it)."""
    hub.turns.claim(session.pk)
    try:
        yield
    finally:
        hub.turns.release(session.pk)


def test_nothing_queued_is_refused(session, member):
    with pytest.raises(NotQueuedError):
        steering_retract(session_id=session.pk, user=member)
    sessions.session_begin(
        session_id=session.pk, user=member, text="Plan the beta"
    )  # running, nothing queued
    with pytest.raises(NotQueuedError):
        steering_retract(session_id=session.pk, user=member)


def test_only_the_sessions_owner_may_take_back_its_steering(session, member, users, chat_project):
    with running_here(session):
        sessions.session_begin(session_id=session.pk, user=member, text="Plan the beta")
        sessions.session_begin(session_id=session.pk, user=member, text="Only epics")
    for name in ("owner", "maintainer", "viewer", "stranger"):  # someone else's chat: as good as unknown
        with pytest.raises(NotFoundError):
            steering_retract(session_id=session.pk, user=users[name])
    with pytest.raises(NotFoundError):
        steering_retract(session_id=uuid.uuid4(), user=member)
    membership_set(actor=Actor(user=users["owner"]), project=chat_project, username="member", role="viewer")
    with pytest.raises(PermissionDeniedError):  # its owner, demoted: as for sending
        steering_retract(session_id=session.pk, user=users["member"])
    assert queued(session) == ["Only epics"]


def test_in_a_questions_sub_chat_only_the_asker_takes_back(chat_project, member, maintainer):
    question = agent_questions.question_create(user=member, project=chat_project, text="Which database?")
    with running_here(question.session):
        sessions.session_begin(
            session_id=question.session.pk, user=member, text="Which database?", question=True
        )
        sessions.session_begin(session_id=question.session.pk, user=member, text="Also the cache")
    with pytest.raises(PermissionDeniedError) as refused:  # a member who may answer its questions
        steering_retract(session_id=question.session.pk, user=maintainer)
    assert "Only the agent that asked" in refused.value.message
    assert queued(question.session) == ["Also the cache"]
    assert steering_retract(session_id=question.session.pk, user=member) == "Also the cache"


# ---------------------------------------------------------------- over the WebSocket


async def test_a_retract_frame_tells_every_watcher_and_a_late_one_is_refused(scripted, session, member):
    hang = Hang(text="Checking", then=say("Done."))
    scripted.add(hang)
    mine, other_tab = await open_socket(session, member), await open_socket(session, member)
    await mine.send_json_to({"type": "message", "text": "What is planned?"})
    await hang.started.wait()
    await mine.send_json_to({"type": "message", "text": "Only epics, please"})
    await eventually(sync(lambda: queued(session) == ["Only epics, please"]), 5.0, every=0.02)
    await mine.send_json_to({"type": "retract"})
    for ws in (mine, other_tab):
        got = await frames_until(ws, "steer_retracted")
        assert got[-1]["text"] == "Only epics, please"
        assert isinstance(got[-1]["n"], int)
        assert "origin" not in got[-1]
    await mine.send_json_to({"type": "retract"})  # nothing left
    refused = await frames_until(mine, "error")
    assert refused[-1]["code"] == "not_queued"
    hang.release.set()
    assert (await frames_until(mine, "turn_ended"))[-1]["reason"] == "completed"
    assert "Only epics, please" not in texts_sent(scripted)
    await mine.disconnect()
    await other_tab.disconnect()


async def test_bad_retract_frames_get_an_error_and_the_connection_stays(scripted, session, member):
    ws = await open_socket(session, member)
    for frame in ({"type": "retract", "text": "Only epics"}, {"type": "retract", "seq": 3}):
        await ws.send_to(text_data=json.dumps(frame))
        error = await ws.receive_json_from()
        assert (error["type"], error["code"]) == ("error", "invalid")
        assert "retract frame has no field" in error["message"]
    await ws.send_json_to({"type": "retract"})  # a good frame, an idle session: refused, not closed
    assert (await ws.receive_json_from())["code"] == "not_queued"
    scripted.add(say("Still here."))
    await ws.send_json_to({"type": "message", "text": "Hello?"})
    assert (await frames_until(ws, "turn_ended"))[-1]["reason"] == "completed"
    await ws.disconnect()


async def test_a_member_answering_a_sub_chat_cannot_retract_the_askers_steering(
    scripted, chat_project, member, maintainer
):
    question = await sync(agent_questions.question_create)(
        user=member, project=chat_project, text="Which database?"
    )
    hang = Hang(text="Looking")
    scripted.add(hang)
    await runner.send(session_id=question.session.pk, user=member, text="Which database?", question=True)
    await hang.started.wait()
    await runner.send(session_id=question.session.pk, user=member, text="Also the cache")
    ws = await open_socket(question.session, maintainer)
    await ws.send_json_to({"type": "retract"})
    refused = await frames_until(ws, "error")
    assert refused[-1]["code"] == "permission_denied"
    assert await sync(queued)(question.session) == ["Also the cache"]
    await ws.send_json_to({"type": "dance"})  # still open: the frame was refused, not the socket
    assert (await frames_until(ws, "error"))[-1]["code"] == "unknown_type"
    await runner.stop(session_id=question.session.pk, user=member)
    await runner.wait(question.session.pk)
    await ws.disconnect()


@pytest.mark.skipif(not settings.PRODUCTION_MODE, reason="processes meet over Redis (production mode)")
async def test_the_retraction_reaches_a_watcher_in_another_process(scripted, session, member):
    # Named: no title proposal after the turn (its publish, with a second relay receiving on this
    # process's channel layer, left a receive that the event loop's teardown waited on forever).
    await sync(session_rename)(session_id=session.pk, user=member, title="Retract across processes")
    hang = Hang(text="Checking", then=say("Done."))
    scripted.add(hang)
    await runner.send(session_id=session.pk, user=member, text="What is planned?")
    await hang.started.wait()
    await runner.send(session_id=session.pk, user=member, text="Only epics, please")
    elsewhere = Runner(gateway=scripted)  # another daphne process's runner, with its own relay
    watch = elsewhere.watch(session_id=session.pk, user=member)
    assert (await anext(watch))["type"] == "state"
    await runner.retract(session_id=session.pk, user=member)

    async def next_retraction():
        while (frame := await anext(watch))["type"] != "steer_retracted":
            pass
        return frame

    frame = await asyncio.wait_for(next_retraction(), timeout=5)
    assert frame["text"] == "Only epics, please"
    hang.release.set()
    await runner.wait(session.pk)
    await watch.aclose()
