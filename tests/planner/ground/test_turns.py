"""A turn running here keeps its frames so far for watchers who come later
(``planner/ground/turns.py``), each run of text deltas as one frame."""

from __future__ import annotations

import uuid

from planner.agent import frames
from planner.agent.frames import Frame
from planner.ground.turns import LiveTurn
from planner.live.outbox import NoOutbox


def test_a_late_watcher_gets_each_run_of_deltas_as_one_frame_and_every_other_frame():
    live = LiveTurn(session_id=uuid.uuid4(), turn=1, outbox=NoOutbox())
    sent: list[Frame] = [
        frames.text_delta("Let "),
        frames.text_delta("me "),
        frames.text_delta("look."),
        frames.tool_call(id="t1", name="list_items", input={}),
        frames.text_delta("Done"),
        frames.text_delta("."),
    ]
    for frame in sent:
        live.remember(frame)

    assert live.frames == frames.coalesced(sent)
    assert [frame.get("text") for frame in live.frames] == ["Let me look.", None, "Done."]
    assert sent[0] == frames.text_delta("Let ")  # the frames sent are left as they were
