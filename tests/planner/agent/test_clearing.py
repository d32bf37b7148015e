"""Stale tool results cleared from what a model call sends (planner/agent/clearing.py)."""

from __future__ import annotations

import itertools
import json

import pytest

from planner.agent import clearing, compaction
from planner.agent.gateway import request_params
from planner.agent.messages import ChatMessage, ModelRequest, TextBlock, ToolResultBlock, ToolUseBlock
from tests.fakes.messages_api import history_problems
from tests.fakes.prompt_cache import PromptCache

RESULT = "r" * 400  # 100 tokens


@pytest.fixture(autouse=True)
def thresholds(monkeypatch):
    """Small thresholds: clear when a turn opens over 1,000 tokens of results, keep 3, clear at
    least 500; within a turn, over 3,000."""
    monkeypatch.setattr(clearing, "TRIGGER_TOKENS", 1_000)
    monkeypatch.setattr(clearing, "KEEP_RESULTS", 3)
    monkeypatch.setattr(clearing, "MIN_CLEAR_TOKENS", 500)
    monkeypatch.setattr(clearing, "TURN_TOKENS", 3_000)


def turn(number: int, seq: int, *, content: str = RESULT, error: bool = False) -> list[ChatMessage]:
    """A turn of three tool calls (100 tokens of results each) and an answer, from ``seq``."""
    ids = [f"t{number}_{i}" for i in range(3)]
    return [
        ChatMessage("user", (TextBlock(f"turn {number}"),), "human", seq),
        ChatMessage(
            "assistant",
            tuple(ToolUseBlock(i, "get_item", {"key": "BAL-1"}) for i in ids),
            "assistant",
            seq + 1,
        ),
        ChatMessage(
            "user", tuple(ToolResultBlock(i, content, is_error=error) for i in ids), "tool_results", seq + 2
        ),
        ChatMessage("assistant", (TextBlock(f"answer {number}"),), "assistant", seq + 3),
    ]


def session(turns: int) -> list[ChatMessage]:
    return [m for n in range(1, turns + 1) for m in turn(n, 4 * n - 3)]


def results(messages) -> dict[str, str]:
    return {b.tool_use_id: b.content for m in messages for b in m.content if isinstance(b, ToolResultBlock)}


def sent(messages) -> list[dict]:
    request = ModelRequest(
        model="m", system="s", messages=compaction.request_messages(messages, "", None), max_tokens=10
    )
    return request_params(request)["messages"]


def test_nothing_is_cleared_until_a_turn_opens_past_the_trigger():
    assert compaction.request_messages(session(3), "", None) == tuple(session(3))  # 900 tokens
    messages = session(4)  # 1,200 tokens, but within turn 4: its later calls read them cached
    assert compaction.request_messages(messages, "", None) == tuple(messages)


def test_an_event_clears_every_result_but_the_latest_round():
    messages = [*session(4), turn(5, 17)[0]]  # turn 5 opens past the trigger
    shown = results(compaction.request_messages(messages, "", None))
    assert [i for i, c in shown.items() if c == clearing.STUB] == [
        f"t{n}_{i}" for n in (1, 2, 3) for i in range(3)
    ]
    assert [shown[f"t4_{i}"] for i in range(3)] == [RESULT] * 3


def test_between_events_the_cleared_set_stays_put():
    cleared = [clearing.cleared_results(session(n)) for n in range(1, 12)]
    assert [len(c) for c in cleared] == [0, 0, 0, 0, 9, 9, 9, 18, 18, 18, 27]
    assert all(a <= b for a, b in itertools.pairwise(cleared))


def test_an_event_waits_until_it_frees_the_minimum(monkeypatch):
    monkeypatch.setattr(clearing, "MIN_CLEAR_TOKENS", 1_000)
    assert len(clearing.cleared_results(session(5))) == 0  # 900 tokens clearable: not enough
    assert len(clearing.cleared_results(session(6))) == 12


def test_within_a_long_turn_the_results_the_model_has_not_seen_stay_whole(monkeypatch):
    monkeypatch.setattr(clearing, "KEEP_RESULTS", 1)
    monkeypatch.setattr(clearing, "TURN_TOKENS", 1_000)
    messages = session(4)  # past the limit within turn 4, after its results
    shown = results(compaction.request_messages(messages, "", None))
    assert [shown[f"t4_{i}"] for i in range(3)] == [RESULT] * 3  # one message's results: all kept
    assert [i for i, c in shown.items() if c == clearing.STUB] == [
        f"t{n}_{i}" for n in (1, 2, 3) for i in range(3)
    ]


def test_the_stub_keeps_the_call_its_pairing_and_is_error():
    messages = [*session(2), *turn(3, 9, error=True), *turn(4, 13), turn(5, 17)[0]]
    wire = sent(messages)
    assert history_problems(wire) == []
    uses = [b for m in wire for b in m["content"] if b["type"] == "tool_use"]
    assert len(uses) == 12
    assert uses[0]["input"] == {"key": "BAL-1"}
    cleared = [b for m in wire for b in m["content"] if b.get("content") == clearing.STUB]
    assert len(cleared) == 9
    assert [b.get("is_error", False) for b in cleared] == [False] * 6 + [True] * 3


def test_short_results_are_left_as_they_are():
    messages = [*turn(1, 1, content="{}"), *session(6)[4:]]
    shown = results(compaction.request_messages(messages, "", None))
    assert [shown[f"t1_{i}"] for i in range(3)] == ["{}"] * 3


def test_between_events_each_request_begins_with_the_one_before_byte_for_byte():
    history: list[ChatMessage] = []
    previous: list[dict] | None = None
    prefixes_kept = []
    for number in range(1, 13):
        for message in turn(number, 4 * number - 3):
            history.append(message)
            if message.role == "assistant":
                continue
            wire = [
                {**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
                for m in sent(history)
            ]
            if previous is not None:
                prefixes_kept.append(json.dumps(wire[: len(previous)]) == json.dumps(previous))
            previous = wire
    # 23 requests after the first; turns 5, 8 and 11 open with events, whose requests (those turns'
    # first calls) are the only ones that change what went before.
    assert len(prefixes_kept) == 23
    assert [i + 1 for i, kept in enumerate(prefixes_kept) if not kept] == [8, 14, 20]


def test_after_a_summary_the_replay_starts_after_it():
    messages = session(6)
    sent_messages = compaction.request_messages(messages, "the summary", 12)  # turns 1-3 summarized
    assert sent_messages[0].kind == "summary"
    assert all(c == RESULT for c in results(sent_messages).values())  # 900 tokens left: under the trigger
    assert compaction.pairs_intact(messages, 12)


def test_the_stored_messages_are_not_touched():
    messages = session(6)
    before = [json.dumps(m.wire_content()) for m in messages]
    compaction.request_messages(messages, "", None)
    assert [json.dumps(m.wire_content()) for m in messages] == before
    assert clearing.STUB not in "".join(before)


def test_a_kept_replay_sends_what_a_fresh_one_sends_at_every_call():
    replay = clearing.Replay()
    history: list[ChatMessage] = []
    for number in range(1, 13):  # events as turns 5, 8 and 11 open
        for message in turn(number, 4 * number - 3):
            history.append(message)
            fresh = compaction.request_messages(history, "", None)
            assert compaction.request_messages(history, "", None, replay) == fresh
    assert replay.cleared == clearing.cleared_results(history)
    assert len(replay.cleared) == 27


def test_between_events_a_kept_replay_sends_the_same_messages_again():
    replay = clearing.Replay()
    history = session(5)  # turn 5 opened with an event
    before = compaction.request_messages(history, "", None, replay)
    history.extend(turn(6, 21))
    after = compaction.request_messages(history, "", None, replay)
    assert all(a is b for a, b in zip(before, after, strict=False))  # the stubbed copies too
    assert after[len(before) :] == tuple(turn(6, 21))


def test_a_history_that_does_not_go_on_from_the_replayed_one_is_replayed_again():
    replay = clearing.Replay()
    messages = session(5)
    compaction.request_messages(messages, "", None, replay)
    # A summary moved the start.
    assert compaction.request_messages(messages, "the summary", 12, replay) == compaction.request_messages(
        messages, "the summary", 12
    )
    # The last message taken back and another in its place.
    other = [*messages[:-1], ChatMessage("assistant", (TextBlock("another answer"),), "assistant", 20)]
    compaction.request_messages(messages, "", None, replay)
    fresh = compaction.request_messages(other, "", None)
    assert compaction.request_messages(other, "", None, replay) == fresh
    # Fewer messages than were replayed.
    assert compaction.request_messages(messages[:8], "", None, replay) == tuple(messages[:8])


def test_a_request_marks_its_last_block_without_touching_what_later_requests_send():
    messages = session(2)
    first = request_params(ModelRequest(model="m", system="s", messages=tuple(messages[:3]), max_tokens=10))
    second = request_params(ModelRequest(model="m", system="s", messages=tuple(messages), max_tokens=10))
    assert first["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    marked = [b for m in second["messages"] for b in m["content"] if "cache_control" in b]
    assert marked == [{"type": "text", "text": "answer 2", "cache_control": {"type": "ephemeral"}}]
    shared = messages[2].wire["content"][-1]
    assert shared == {"type": "tool_result", "tool_use_id": "t1_2", "content": RESULT}


def anchored(messages: list[ChatMessage]) -> int | None:
    replay = clearing.Replay()
    compaction.request_messages(messages, "", None, replay)
    return replay.anchor


def test_the_anchor_is_where_the_next_event_starts_and_an_events_request_keeps_the_old_one():
    # Before any event: the message before the first result (turn 1's tool calls).
    assert anchored(session(3)) == 1
    # The event's request (turn 5's first call) is marked where the cache holds the prefix: as before.
    assert anchored([*session(4), turn(5, 17)[0]]) == 1
    # The next calls are marked before the first result left whole (turn 4's tool calls), which the
    # next event (turn 8) leaves as it is and reads.
    assert anchored(session(5)) == 13
    assert anchored([*session(7), turn(8, 29)[0]]) == 13
    assert anchored(session(8)) == 25


def test_a_request_marks_its_anchor_too():
    messages = session(5)
    params = request_params(
        ModelRequest(
            model="m", system="s", messages=tuple(messages), max_tokens=10, anchor=anchored(messages)
        )
    )
    marked = [i for i, m in enumerate(params["messages"]) if "cache_control" in m["content"][-1]]
    assert marked == [13, len(messages) - 1]
    assert "cache_control" not in messages[13].wire["content"][-1]  # the shared wire form is untouched


def event_writes(*, anchored_too: bool) -> dict[int, int]:
    """What each turn's first call writes to the fake's prompt cache (the API's look-back of 20
    blocks) over a 50-turn session, with the anchor marked or not."""
    cache = PromptCache()
    history: list[ChatMessage] = []
    replay = clearing.Replay()
    written: dict[int, int] = {}
    for number in range(1, 51):
        for message in turn(number, 4 * number - 3):
            history.append(message)
            if message.role == "assistant":
                continue
            sent_messages = compaction.request_messages(history, "", None, replay)
            anchor = replay.anchor if anchored_too else None
            request = ModelRequest(
                model="m", system="s", messages=sent_messages, max_tokens=10, anchor=anchor
            )
            _, creation, _ = cache.usage(request_params(request))
            if message.kind == "human":
                written[number] = creation
    return written


def test_an_events_cache_rewrite_does_not_grow_with_the_session():
    written = event_writes(anchored_too=True)
    events = list(range(8, 51, 3))  # every third turn opens with an event, from turn 5 on
    assert max(written[n] for n in events) <= 1.05 * min(written[n] for n in events)  # flat
    assert all(written[n] < 2 * written[8] for n in range(8, 51))
    # Without the anchor, the look-back finds nothing cached that far back: the rewrite grows.
    unanchored = event_writes(anchored_too=False)
    assert unanchored[50] > 5 * written[50]
