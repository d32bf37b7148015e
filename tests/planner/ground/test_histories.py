"""A session's history kept in the process between turns: a turn reads only what it adds."""

from __future__ import annotations

import uuid

import pytest

from planner.agent.loop import History
from planner.agent.messages import ChatMessage, TextBlock
from planner.domain.selectors import session_history
from planner.ground.histories import Histories
from planner.live.hub import hub
from planner.models import Message, Session
from tests.fakes.scripted import call, say
from tests.planner.conftest import drive, sync

pytestmark = pytest.mark.django_db(transaction=True)


def text(seq: int, words: str = "x") -> ChatMessage:
    return ChatMessage(role="user", content=(TextBlock(words),), kind="human", seq=seq)


def stored(session) -> list[tuple[int, str, list]]:
    return list(Message.objects.filter(session=session).order_by("seq").values_list("seq", "kind", "content"))


def as_rows(history: History) -> list[tuple[int, str, list]]:
    return [(m.seq, m.kind, m.wire_content()) for m in history.messages]


def test_a_kept_history_is_taken_once_and_evicted_past_its_budget():
    a, b = uuid.uuid4(), uuid.uuid4()
    kept = Histories(budget_chars=10)
    kept.keep(a, History(messages=[text(1, "12345")]))
    kept.keep(b, History(messages=[text(1, "123456")]))
    assert kept.take(a) is None  # 11 characters in all: the least recently kept went
    taken = kept.take(b)
    assert taken is not None
    assert (taken.last_seq, taken.chars) == (1, 6)
    assert kept.take(b) is None  # a turn owns it now


def test_keeping_a_compacted_history_drops_what_the_summary_covers():
    s = uuid.uuid4()
    kept = Histories()
    history = History(messages=[text(1), text(2), text(3)], summary="earlier", summary_up_to=2)
    kept.keep(s, history)
    taken = kept.take(s)
    assert taken is not None
    assert [m.seq for m in taken.history.messages] == [3]
    assert taken.last_seq == 3


async def test_the_next_turn_sends_the_kept_history_and_what_others_added(planner, model, session, member):
    model.add(call("list_items", {}), say("One item."))
    await drive(planner, session, member, "What is planned?")
    # This process keeps turn 1. Another process runs turn 2 (it reads everything from the
    # database); this one's copy, stale by a turn, comes back into use for turn 3.
    stale = hub.histories.take(session.pk)
    assert stale is not None
    model.add(say("Still one item."))
    await drive(planner, session, member, "And now?")
    hub.histories.keep(session.pk, stale.history)
    model.add(say("Yes."))
    await drive(planner, session, member, "Sure?")
    sent = model.turn_requests[-1].messages
    rows = await sync(stored)(session)
    assert [(m.seq, m.kind, m.wire_content()) for m in sent] == rows[:-1]  # all but its answer


def test_a_kept_history_that_does_not_line_up_is_read_again(session, member):
    for seq, role in ((1, "user"), (2, "assistant"), (3, "user")):
        Message.objects.create(
            session=session,
            seq=seq,
            role=role,
            kind=role,
            turn=1,
            content=[{"type": "text", "text": f"m{seq}"}],
        )
    Session.objects.filter(pk=session.pk).update(last_message_seq=3)
    session.refresh_from_db()
    # A copy that claims to hold everything up to seq 1 but lacks it: the numbers still line up,
    # so only seq 2 and 3 are read; a copy whose summary differs from the session's is dropped.
    hub.histories.keep(session.pk, History(messages=[text(1, "m1")], summary="other", summary_up_to=0))
    assert as_rows(session_history(session=session)) == stored(session)
    # The session's count moved past what the database holds: a gap, read in full.
    hub.histories.keep(session.pk, History(messages=[text(1, "m1")]))
    Session.objects.filter(pk=session.pk).update(last_message_seq=4)
    session.refresh_from_db()
    assert as_rows(session_history(session=session)) == stored(session)


def test_a_turn_reads_only_the_messages_added_since_its_kept_history(session, django_assert_num_queries):
    def add(seq: int) -> None:
        Message.objects.create(
            session=session,
            seq=seq,
            role="user",
            kind="human",
            turn=1,
            content=[{"type": "text", "text": f"m{seq}"}],
        )
        Session.objects.filter(pk=session.pk).update(last_message_seq=seq)
        session.refresh_from_db()

    for seq in range(1, 41):
        add(seq)
    hub.histories.keep(session.pk, session_history(session=session))  # nothing kept yet: read in full
    # Messages are never rewritten; one that was would show whether the turn read it again.
    Message.objects.filter(session=session, seq=5).update(content=[{"type": "text", "text": "rewritten"}])
    add(41)
    with django_assert_num_queries(1):
        history = session_history(session=session)
    assert [m.text for m in history.messages] == [f"m{seq}" for seq in range(1, 42)]
    hub.histories.keep(session.pk, history)
    with django_assert_num_queries(0):  # nothing new: nothing read
        assert len(session_history(session=session).messages) == 41


def test_a_new_chat_reads_no_messages_for_its_first_turn(session, django_assert_num_queries):
    with django_assert_num_queries(0):  # nothing stored: nothing to read
        assert session_history(session=session).messages == []
    Message.objects.create(
        session=session, seq=1, role="user", kind="human", turn=1, content=[{"type": "text", "text": "m1"}]
    )
    Session.objects.filter(pk=session.pk).update(last_message_seq=1)
    session.refresh_from_db()
    with django_assert_num_queries(1):
        assert [m.text for m in session_history(session=session).messages] == ["m1"]
