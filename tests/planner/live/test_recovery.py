"""Recovery of a session whose turn's process died (docs/architecture.md)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client import REGISTRY

from planner.agent.messages import ChatMessage, ToolUseBlock
from planner.domain.services.sessions import message_save, session_begin, session_create
from planner.live.hub import heartbeat, hub
from planner.models import Event, Message, Session, ToolCall
from planner.tasks import recover_dead_turns
from tests.fakes.scripted import say
from tests.planner.conftest import drive, sync
from tests.planner.web.test_api import client_for

pytestmark = pytest.mark.django_db(transaction=True)


def crash_mid_round(session, user, *, ran: bool = False) -> None:
    """What a process killed during a tool round leaves behind."""
    session_begin(session_id=session.pk, user=user, text="Plan the beta")
    calls = (ToolUseBlock("toolu_a", "list_items", {}), ToolUseBlock("toolu_b", "list_runnable", {}))
    message_save(
        session_id=session.pk,
        turn=1,
        after_seq=1,
        message=ChatMessage(role="assistant", content=calls, kind="assistant"),
    )
    if ran:
        ToolCall.objects.create(
            session=session,
            turn=1,
            tool_use_id="toolu_a",
            name="list_items",
            input={},
            output={"items": []},
            actor=f"planner:{session.pk}",
            on_behalf_of=user,
        )
    Session.objects.filter(pk=session.pk).update(
        turn_owner="gone-host:4242:deadbeef", heartbeat_at=timezone.now() - timedelta(minutes=10)
    )


async def test_loading_a_dead_session_recovers_it(chat_project, member, session):
    await sync(crash_mid_round)(session, member, ran=True)
    client = await client_for(member)
    body = (await client.get(f"/api/v1/planner/sessions/{session.pk}")).json()
    assert body["state"] == "idle"
    results = body["messages"][-1]
    assert results["kind"] == "tool_results"
    assert [b["tool_use_id"] for b in results["content"]] == ["toolu_a", "toolu_b"]
    assert "is_error" not in results["content"][0]  # it ran: its recorded output is kept
    assert results["content"][1]["is_error"] is True
    assert body["events"][-1]["kind"] == "turn_ended"
    assert body["events"][-1]["data"]["reason"] == "failed"


async def test_the_next_message_after_a_crash_completes_a_turn(planner, model, chat_project, member, session):
    await sync(crash_mid_round)(session, member)
    model.add(say("Back again."))
    begin = await drive(planner, session, member, "Are you there?")
    assert begin.meaning == "started"
    kinds = await sync(
        lambda: list(Message.objects.filter(session=session).order_by("seq").values_list("kind", flat=True))
    )()
    assert kinds == ["human", "assistant", "tool_results", "human", "assistant"]
    ended = await sync(
        lambda: list(Event.objects.filter(session=session, kind="turn_ended").values_list("data", flat=True))
    )()
    assert [e["reason"] for e in ended] == ["failed", "completed"]


def test_the_periodic_sweep_recovers_sessions_nobody_opens(chat_project, member, session):
    crash_mid_round(session, member)
    assert recover_dead_turns.delay() is not None  # eager in tests: already ran
    assert Session.objects.get(pk=session.pk).state == "idle"
    assert Event.objects.filter(session=session, kind="turn_ended").count() == 1
    assert Session.objects.get(pk=session.pk).state == "idle"
    assert recover_dead_turns() == 0


def test_a_recovered_turn_is_counted_as_failed_once(chat_project, member, session):
    def failed() -> float:
        return REGISTRY.get_sample_value("ballet_planner_turns_total", {"reason": "failed"}) or 0.0

    before = failed()
    crash_mid_round(session, member)
    assert recover_dead_turns() == 1
    assert recover_dead_turns() == 0
    assert failed() == before + 1


def test_a_live_turn_of_this_process_is_not_recovered(chat_project, member, session):
    session_begin(session_id=session.pk, user=member, text="Hello")
    hub.turns.claim(session.pk)
    try:
        assert recover_dead_turns() == 0
    finally:
        hub.turns.release(session.pk)
    assert recover_dead_turns() == 1


TRANSACTION_CONTROL = {"BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"}


async def test_one_heartbeat_statement_beats_every_turn_of_its_process(chat_project, member, session):
    other = await sync(session_create)(user=member, project=chat_project)
    elsewhere = await sync(session_create)(user=member, project=chat_project)
    old = timezone.now() - timedelta(minutes=5)
    running = Session.objects.filter(state="running")
    await sync(Session.objects.filter(pk__in=[session.pk, other.pk, elsewhere.pk]).update)(state="running")
    await sync(running.filter(pk=session.pk).update)(turn_owner="here", heartbeat_at=old)
    await sync(running.filter(pk=other.pk).update)(turn_owner="here", heartbeat_at=old)
    await sync(running.filter(pk=elsewhere.pk).update)(turn_owner="there", heartbeat_at=old)

    def beat() -> int:
        with CaptureQueriesContext(connection) as queries:
            heartbeat(session_ids=[session.pk, other.pk, elsewhere.pk], owner="here")
        return len([q for q in queries if q["sql"].split()[0].upper() not in TRANSACTION_CONTROL])

    assert await sync(beat)() == 1
    beats = dict(await sync(lambda: list(Session.objects.values_list("pk", "heartbeat_at")))())
    assert beats[session.pk] > old
    assert beats[other.pk] > old
    assert beats[elsewhere.pk] == old  # another process's turn is not this process's to vouch for


@pytest.mark.skipif(not settings.PRODUCTION_MODE, reason="SQLite has one writer: nothing holds a row")
def test_the_heartbeat_skips_a_row_a_save_holds_instead_of_waiting(chat_project, member, session):
    """A turn's save holds its session's row (and writes its heartbeat itself): the beat skips it
    rather than wait on rows in no set order, which can deadlock with a save elsewhere."""
    other = session_create(user=member, project=chat_project)
    old = timezone.now() - timedelta(minutes=5)
    Session.objects.filter(pk__in=[session.pk, other.pk]).update(
        state="running", turn_owner="here", heartbeat_at=old
    )
    holding, done = threading.Event(), threading.Event()

    def hold_the_row() -> None:
        try:
            with transaction.atomic():
                Session.objects.select_for_update().get(pk=session.pk)
                holding.set()
                done.wait(timeout=10)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_the_row)
    holder.start()
    try:
        assert holding.wait(timeout=10)
        heartbeat(session_ids=[session.pk, other.pk], owner="here")  # returns: nothing waited
        beats = dict(Session.objects.values_list("pk", "heartbeat_at"))
    finally:
        done.set()
        holder.join()
    assert beats[session.pk] == old
    beaten = beats[other.pk]
    assert beaten is not None
    assert beaten > old
