"""Frames joined for a watcher that fell behind, and the watcher's inbox."""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from planner.agent import frames
from planner.agent.frames import Frame
from planner.live.inbox import Inbox


def delta(text: str, n: int) -> Frame:
    return frames.numbered(frames.text_delta(text), n=n, origin="p")


def test_runs_of_text_deltas_are_joined_and_everything_else_kept_in_order():
    call = frames.tool_call(id="t1", name="get_item", input={"key": "BAL-1"})
    tool = frames.numbered(call, n=3, origin="p")
    batch = [delta("a", 1), delta("b", 2), tool, delta("c", 4), delta("d", 5), delta("e", 6)]
    before = copy.deepcopy(batch)
    out = frames.coalesced(batch)
    assert [(f["type"], f.get("text"), f["n"]) for f in out] == [
        ("text_delta", "ab", 2),
        ("tool_call", None, 3),
        ("text_delta", "cde", 6),
    ]
    assert batch == before  # shared with other watchers and the turn's catch-up: never changed


def test_a_text_reset_splits_runs():
    reset = frames.numbered(frames.text_reset(), n=2, origin="p")
    out = frames.coalesced([delta("partial", 1), reset, delta("again", 3)])
    assert [f["type"] for f in out] == ["text_delta", "text_reset", "text_delta"]
    assert [f.get("text") for f in out] == ["partial", None, "again"]


def test_nothing_to_join():
    assert frames.coalesced([]) == []
    single = [delta("x", 1)]
    assert frames.coalesced(single) == single


def test_numbered_copies_the_frame_into_its_envelope():
    ended = frames.turn_ended(reason="failed", error="The model declined to answer (refusal).")
    out = frames.numbered(ended, n=7, origin="proc-a")
    assert out == {**ended, "n": 7, "origin": "proc-a"}
    assert "n" not in ended  # shared with the turn's catch-up: never changed


def test_on_the_wire_turn_frames_keep_their_number_but_not_their_origin():
    delta = frames.numbered(frames.text_delta("Hi"), n=3, origin="proc-a")
    assert json.loads(frames.wire(delta)) == {"type": "text_delta", "text": "Hi", "n": 3}
    ended = frames.numbered(frames.turn_ended(reason="completed"), n=4, origin="proc-a")
    assert json.loads(frames.wire(ended)) == {"type": "turn_ended", "reason": "completed", "n": 4}


def test_on_the_wire_a_sockets_own_frames_carry_no_envelope():
    # A number on ``state`` would make the page drop a later frame of the same number.
    state = frames.numbered(frames.state(session_state="idle", last_seq=2, turn=1), n=9, origin="p")
    assert json.loads(frames.wire(state)) == {"type": "state", "state": "idle", "last_seq": 2, "turn": 1}
    error = frames.error(code="rate_limited", message="Slow down.")
    numbered_error = frames.numbered(error, n=10, origin="p")
    assert json.loads(frames.wire(numbered_error)) == {**error}


async def test_the_inbox_hands_over_everything_waiting_and_a_replay_goes_first():
    inbox = Inbox([delta("a", 1)])
    assert await inbox.take() == [delta("a", 1)]
    waiting = asyncio.ensure_future(inbox.take())
    await asyncio.sleep(0)
    assert not waiting.done()  # nothing there: it waits
    inbox.put([delta("c", 3)])
    inbox.put_first([delta("b", 2)])
    inbox.put([delta("d", 4)])
    assert [f["n"] for f in await asyncio.wait_for(waiting, 1)] == [2, 3, 4]
    inbox.put_first([])
    later = asyncio.ensure_future(inbox.take())
    await asyncio.sleep(0)
    assert not later.done()  # an empty replay wakes nobody for nothing
    later.cancel()


def test_a_user_message_says_when_it_was_sent_in_utc():
    paris = datetime(2026, 12, 1, 22, 5, 3, 250000, tzinfo=ZoneInfo("Europe/Paris"))
    frame = frames.user_message(seq=3, text="Hi", author="demo", kind="human", at=paris)
    assert frame["at"] == "2026-12-01T21:05:03.250000Z"  # the transcript's created_at format
    on_the_wire = json.loads(frames.wire(frames.numbered(frame, n=1, origin="p")))
    assert on_the_wire["at"] == "2026-12-01T21:05:03.250000Z"


def test_a_user_message_built_now_is_stamped_now():
    before = datetime.now(UTC)
    frame = frames.user_message(seq=1, text="Hi", author="demo", kind="steer")
    after = datetime.now(UTC)
    at = datetime.fromisoformat(frame["at"])
    assert at.utcoffset() == timedelta(0)
    assert before <= at <= after
