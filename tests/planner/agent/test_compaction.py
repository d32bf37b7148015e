"""Compaction, pure: the estimate, the decision, the cut, the summary request."""

from __future__ import annotations

from planner.agent import compaction
from planner.agent.messages import ChatMessage, TextBlock, ToolResultBlock, ToolUseBlock


def human(seq: int, text: str = "hello", kind: str = "human") -> ChatMessage:
    return ChatMessage(role="user", content=(TextBlock(text),), kind=kind, seq=seq)


def answer(seq: int, text: str = "ok") -> ChatMessage:
    return ChatMessage(role="assistant", content=(TextBlock(text),), kind="assistant", seq=seq)


def uses(seq: int, tool_id: str) -> ChatMessage:
    return ChatMessage(
        role="assistant", content=(ToolUseBlock(tool_id, "list_items", {}),), kind="assistant", seq=seq
    )


def results(seq: int, tool_id: str) -> ChatMessage:
    return ChatMessage(role="user", content=(ToolResultBlock(tool_id, "{}"),), kind="tool_results", seq=seq)


def test_estimate_uses_reported_usage_plus_newer_messages_at_four_chars_per_token():
    messages = [human(1, "a" * 400), answer(2, "b" * 400), human(3, "c" * 800)]
    estimate = compaction.estimate_tokens(
        messages=messages, reported_tokens=5000, reported_seq=2, summary="", system="s" * 4000, tools=()
    )
    assert estimate == 5000 + 200


def test_estimate_without_usage_counts_everything_by_characters():
    messages = [human(1, "a" * 400), answer(2, "b" * 400)]
    estimate = compaction.estimate_tokens(
        messages=messages, reported_tokens=0, reported_seq=0, summary="x" * 40, system="s" * 400, tools=()
    )
    assert estimate == (400 + 400 + 40 + 400) // 4


def test_compaction_triggers_only_above_the_threshold():
    assert compaction.should_compact(100_001, 100_000)
    assert not compaction.should_compact(100_000, 100_000)


def test_cut_is_just_before_the_latest_human_message():
    messages = [
        human(1),
        uses(2, "t1"),
        results(3, "t1"),
        answer(4),
        human(5),
        uses(6, "t2"),
        results(7, "t2"),
    ]
    assert compaction.find_cut(messages, None) == 4
    assert compaction.pairs_intact(messages, 4)


def test_cut_passes_over_steering_and_change_notes():
    messages = [
        human(1),
        answer(2),
        human(3),
        uses(4, "t1"),
        results(5, "t1"),
        human(6, kind="steer"),
        human(7, kind="changes"),
        answer(8),
    ]
    assert compaction.find_cut(messages, None) == 2


def test_a_continue_message_is_a_cut_point():
    messages = [human(1), uses(2, "t1"), results(3, "t1"), human(4, kind="continue")]
    assert compaction.find_cut(messages, None) == 3


def test_nothing_to_cut_in_a_first_turn_or_below_the_summary():
    assert compaction.find_cut([human(1), uses(2, "t"), results(3, "t")], None) is None
    assert compaction.find_cut([human(1), answer(2), human(3)], 2) is None


def test_pairs_intact_detects_a_split():
    messages = [human(1), uses(2, "t1"), results(3, "t1")]
    assert not compaction.pairs_intact(messages, 2)


def test_summary_request_holds_the_earlier_summary_and_the_transcript():
    request = compaction.build_summary_request(
        model="claude-small",
        previous_summary="Earlier: decided on passkeys.",
        messages=[human(1, "Plan BAL-3"), uses(2, "t1"), results(3, "t1")],
    )
    text = request.messages[0].content[0].text  # type: ignore[union-attr]
    assert request.model == "claude-small"
    assert request.purpose == "compaction"
    assert "Earlier: decided on passkeys." in text
    assert "Human: Plan BAL-3" in text
    assert "Planner called list_items" in text
    assert request.tools == ()


def test_request_messages_are_the_summary_then_newer_messages():
    messages = [human(1), answer(2), human(3, "new question")]
    sent = compaction.request_messages(messages, "the summary", 2)
    assert [m.seq for m in sent] == [2, 3]
    assert "the summary" in sent[0].text
    assert compaction.request_messages(messages, "", None) == tuple(messages)
