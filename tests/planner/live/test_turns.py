"""The turn loop through the runner, on a scripted model."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.db import connection

from planner.agent import compaction
from planner.agent.calls import GatewayError
from planner.agent.gateway import AnthropicGateway
from planner.domain.services.sessions import rows, steps
from planner.domain.tools import ToolContext, call_tool
from planner.live import runner as runner_module
from planner.live.hub import hub
from planner.models import Event, Message, Session, ToolCall, UsageRecord
from tests.fakes.messages_api import FakeMessagesAPI, TextReply
from tests.fakes.scripted import Answer, Hang, call, say
from tests.planner.conftest import drive, sync
from tracker.db import sql
from tracker.models import Changeset, Membership, Organization
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_reject
from tracker.services.items import item_update
from tracker.services.projects import project_update
from tracker.services.skills import skill_version_create
from tracker.trust import permissions

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_turn_answers_and_records_everything(planner, model, session, member, make_item):
    await sync(make_item)(title="Login page", state="ready")
    model.add(call("list_items", {"kind": "ticket"}), say("You have one ticket: BAL-1."))
    await drive(planner, session, member, "What is planned?")
    messages = await sync(lambda: list(Message.objects.filter(session=session).order_by("seq")))()
    # The item was created after the session opened, so the first call carries a change note.
    assert [m.kind for m in messages] == ["human", "changes", "assistant", "tool_results", "assistant"]
    assert '"BAL-1" created by "user:owner"' in messages[1].content[0]["text"]
    assert messages[-1].content == [{"type": "text", "text": "You have one ticket: BAL-1."}]
    tool_call = await sync(ToolCall.objects.get)(session=session)
    assert (tool_call.name, tool_call.is_error, tool_call.actor) == (
        "list_items",
        False,
        f"planner:{session.pk}",
    )
    assert tool_call.output["items"][0]["key"] == "BAL-1"
    kinds = await sync(lambda: list(Event.objects.filter(session=session).values_list("kind", flat=True)))()
    assert kinds == ["changes_noted", "turn_started", "turn_ended"]  # the note's summary, for people
    refreshed = await sync(Session.objects.get)(pk=session.pk)
    assert refreshed.state == "idle"
    assert len(model.turn_requests) == 2


async def events_of(session) -> list[tuple[str, dict]]:
    return await sync(
        lambda: [(e.kind, e.data) for e in Event.objects.filter(session=session).order_by("pk")]
    )()


async def kinds_of(session) -> list[str]:
    return await sync(
        lambda: list(Message.objects.filter(session=session).order_by("seq").values_list("kind", flat=True))
    )()


async def state_of(session) -> str:
    return (await sync(Session.objects.get)(pk=session.pk)).state


async def set_settings(project, owner, **values):
    await sync(project_update)(actor=Actor(user=owner), project=project, settings=values)


async def test_max_rounds_pauses_and_the_next_message_continues(
    planner, model, session, member, owner, chat_project
):
    await set_settings(chat_project, owner, max_rounds=2)
    model.add(call("list_items"), call("list_runnable"))
    await drive(planner, session, member, "Look around")
    assert await state_of(session) == "paused"
    assert (await events_of(session))[-1] == ("turn_ended", {"reason": "max_rounds"})
    model.add(say("Done looking."))
    begin = await drive(planner, session, member, "Go on")
    assert begin.meaning == "continued"
    assert await state_of(session) == "idle"
    last = model.turn_requests[-1]
    assert last.messages[-1].kind == "continue"
    assert await kinds_of(session) == [
        "human",
        "changes",
        "assistant",
        "tool_results",
        "assistant",
        "tool_results",
        "continue",
        "assistant",
    ]
    started = [data for kind, data in await events_of(session) if kind == "turn_started"]
    assert [s["continued"] for s in started] == [False, True]


async def test_stop_keeps_partial_text_and_leaves_a_valid_history(planner, model, session, member):
    hang = Hang(text="Let me think about the pla")
    model.add(hang)
    await planner.send(session_id=session.pk, user=member, text="Plan the release")
    await hang.started.wait()
    assert await planner.stop(session_id=session.pk, user=member) is True
    await planner.wait(session.pk)
    assert (await events_of(session))[-1] == ("turn_ended", {"reason": "stopped"})
    messages = await sync(lambda: list(Message.objects.filter(session=session).order_by("seq")))()
    assert messages[-1].content == [{"type": "text", "text": "Let me think about the pla"}]
    assert await state_of(session) == "idle"
    model.add(say("Here is the plan."))
    await drive(planner, session, member, "Go ahead")
    assert model.turn_requests[-1].messages[-2].text == "Let me think about the pla"


async def test_stop_between_tool_calls_answers_the_pending_ones(planner, model, session, member, monkeypatch):
    model.add(call("list_items", {}, ("list_runnable", {}), ("list_skills", {})))
    ran, stopped = threading.Event(), threading.Event()
    real_call_tool = steps.call_tool

    def call_tool(name, arguments, context):  # on the database thread, between the round's calls
        outcome = real_call_tool(name, arguments, context)
        if name == "list_items":
            ran.set()
            stopped.wait(timeout=10)
        return outcome

    monkeypatch.setattr(steps, "call_tool", call_tool)
    await planner.send(session_id=session.pk, user=member, text="Survey")
    await asyncio.to_thread(ran.wait, 10)
    assert await planner.stop(session_id=session.pk, user=member) is True  # while the tool runs
    stopped.set()
    await planner.wait(session.pk)
    results = await sync(lambda: Message.objects.filter(session=session, kind="tool_results").get().content)()
    assert [r.get("is_error", False) for r in results] == [False, True, True]
    assert "stopped" in results[1]["content"]
    calls = await sync(
        lambda: list(ToolCall.objects.filter(session=session).values_list("name", flat=True))
    )()
    assert calls == ["list_items"]
    model.add(say("ok"))
    await drive(planner, session, member, "continue")  # the scripted model checks the history is valid


async def test_steering_reaches_the_model_at_its_next_call(planner, model, session, member):
    hang = Hang(text="Checking", then=call("list_items"))
    model.add(hang, say("Noted: only epics."))
    await planner.send(session_id=session.pk, user=member, text="What is planned?")
    await hang.started.wait()
    begin = await planner.send(session_id=session.pk, user=member, text="Only epics, please")
    assert begin.meaning == "steered"
    hang.release.set()
    await planner.wait(session.pk)
    second = model.turn_requests[1]
    assert second.messages[-1].kind == "steer"
    assert second.messages[-1].text == "Only epics, please"
    assert second.messages[-2].kind == "tool_results"
    assert await kinds_of(session) == ["human", "assistant", "tool_results", "steer", "assistant"]


async def test_steering_during_the_final_answer_gets_another_call(planner, model, session, member):
    hang = Hang(text="All done", then=say("All done."))
    model.add(hang, say("Sure, also that."))
    await planner.send(session_id=session.pk, user=member, text="Summarize")
    await hang.started.wait()
    await planner.send(session_id=session.pk, user=member, text="And the risks?")
    hang.release.set()
    await planner.wait(session.pk)
    assert model.turn_requests[-1].messages[-1].text == "And the risks?"
    assert await state_of(session) == "idle"


async def test_a_model_error_fails_the_turn_with_a_readable_reason(planner, model, session, member):
    model.add(GatewayError("authentication", "The Anthropic API refused the credential (401)."))
    await drive(planner, session, member, "Hello")
    assert (await events_of(session))[-1] == (
        "turn_ended",
        {"reason": "failed", "error": "The Anthropic API refused the credential (401)."},
    )
    assert await state_of(session) == "idle"
    model.add(say("Hi"))
    await drive(planner, session, member, "Hello again")
    assert await state_of(session) == "idle"


async def test_a_missing_credential_is_a_clear_failure(
    planner, session, member, owner, chat_project, settings
):
    settings.SERVER = settings.SERVER.__class__(**{**settings.SERVER.__dict__, "anthropic_api_key": None})
    # Anthropic chosen: without a credential the demo planner would answer (docs/architecture.md).
    await sync(project_update)(
        actor=Actor(user=owner), project=chat_project, credential="", settings={"provider": "anthropic"}
    )
    planner.gateway = AnthropicGateway(base_url="http://127.0.0.1:9")
    await drive(planner, session, member, "Hello")
    _, data = (await events_of(session))[-1]
    assert data["reason"] == "failed"
    assert "no Anthropic API key" in data["error"]
    assert "/projects/BAL/settings/" in data["error"]


async def test_a_credential_that_cannot_be_decrypted_fails_the_turn_and_never_bills_the_server(
    planner, session, member, chat_project, settings
):
    settings.SERVER = settings.SERVER.__class__(
        **{**settings.SERVER.__dict__, "anthropic_api_key": "sk-ant-server-key"}
    )
    # The credential key changed and the old one is not among the fallbacks.
    settings.BALLET_CREDENTIAL_KEYS = [Fernet.generate_key().decode()]
    with FakeMessagesAPI() as fake:
        fake.enqueue(TextReply("billed to the server"))
        planner.gateway = AnthropicGateway(base_url=fake.base_url, max_retries=0)
        await drive(planner, session, member, "Hello")
        await planner.gateway.close()
    _, data = (await events_of(session))[-1]
    assert data["reason"] == "failed"
    assert "set the project's credential again" in data["error"]
    assert fake.requests == []


async def test_the_projects_model_is_the_one_the_messages_api_is_asked_for(
    planner, session, member, owner, chat_project
):
    await set_settings(chat_project, owner, model="claude-project-choice")
    with FakeMessagesAPI() as fake:
        fake.enqueue(TextReply("Hello from the project's model."))
        planner.gateway = AnthropicGateway(base_url=fake.base_url, max_retries=0)
        await drive(planner, session, member, "Hello")
        await planner.settle()  # the title call after the first turn, on this gateway too
        await planner.gateway.close()
    assert [r.json["model"] for r in fake.requests] == ["claude-project-choice"]
    metered = await sync(lambda: list(UsageRecord.objects.values_list("purpose", "model")))()
    assert ("turn", "claude-project-choice") in metered


async def test_a_turn_records_the_skill_versions_of_its_prompt(
    planner, model, session, member, owner, maintainer, chat_project
):
    for body in ("Always estimate.", "Always estimate in days."):
        await sync(skill_version_create)(
            actor=Actor(user=maintainer), project=chat_project, name="planner", body=body
        )
    await set_settings(chat_project, owner, skill="planner")
    model.add(say("ok"))
    await drive(planner, session, member, "Hi")
    started = next(d for k, d in await events_of(session) if k == "turn_started")
    assert started["skills"] == [{"name": "planner", "version": 2}]
    assert "Always estimate in days." in model.turn_requests[0].system
    assert "BAL" in model.turn_requests[0].system
    # The next turn's prompt follows a new version, and the project's new name.
    await sync(skill_version_create)(
        actor=Actor(user=maintainer), project=chat_project, name="planner", body="Estimate in hours."
    )
    await sync(project_update)(actor=Actor(user=owner), project=chat_project, name="Balance Two")
    model.add(say("ok"))
    await drive(planner, session, member, "Again")
    assert "Estimate in hours." in model.turn_requests[-1].system
    assert "Balance Two" in model.turn_requests[-1].system
    started = [d for k, d in await events_of(session) if k == "turn_started"][-1]
    assert started["skills"] == [{"name": "planner", "version": 3}]


async def test_the_prompt_names_the_organization_as_it_is_now(planner, model, session, member, chat_project):
    model.add(say("ok"))
    await drive(planner, session, member, "Hi")
    assert "Ballet (key BAL) in the organization Acme." in model.turn_requests[0].system
    # Renamed (in the admin): the next turn's prompt is built anew, not the one kept for the old name.
    await sync(Organization.objects.filter(pk=chat_project.organization_id).update)(name="Acme Holdings")
    model.add(say("ok"))
    await drive(planner, session, member, "Again")
    assert "Ballet (key BAL) in the organization Acme Holdings." in model.turn_requests[-1].system


async def test_a_changeset_decided_in_the_admin_reaches_the_session_that_proposed_it(
    planner, model, session, member, maintainer, chat_project
):
    model.add(
        call(
            "propose_changeset",
            {
                "title": "Add docs",
                "operations": [{"op": "create", "kind": "ticket", "fields": {"title": "Write docs"}}],
            },
        ),
        say("Proposed #1."),
    )
    await drive(planner, session, member, "Plan docs")
    changeset = await sync(Changeset.objects.get)()
    await sync(changeset_reject)(actor=Actor(user=maintainer), changeset=changeset, note="Docs later")
    model.add(say("Understood."))
    await drive(planner, session, member, "What happened?")
    request = model.turn_requests[-1]
    notes = [m for m in request.messages if m.kind == "changes"]
    assert len(notes) == 1
    text = notes[0].text
    assert text.startswith("<workspace-changes>")
    assert text.endswith("</workspace-changes>")
    assert 'changeset #1 "Add docs" rejected by "user:maintainer"; note: "Docs later"' in text
    assert "proposed by" not in text  # its own action is left out


async def test_change_notes_put_the_focus_first_and_advance_last_seen(
    planner, model, session, member, owner, make_item
):
    first = await sync(make_item)(title="Unrelated")
    followed = await sync(make_item)(title="Followed")
    model.add(call("get_item", {"key": followed.key}), say("Read it."))
    await drive(planner, session, member, "Read BAL-2")
    await sync(item_update)(actor=Actor(user=owner), item=first, fields={"title": "Unrelated, renamed"})
    await sync(item_update)(actor=Actor(user=owner), item=followed, fields={"state": "ready"})
    model.add(say("Seen."))
    await drive(planner, session, member, "Anything new?")
    notes = [m for m in model.turn_requests[-1].messages if m.kind == "changes"]
    lines = notes[-1].text.splitlines()
    assert lines[2].startswith(f'- "{followed.key}" updated by "user:owner"')
    assert lines[3].startswith(f'- "{first.key}" updated by "user:owner"')
    model.add(say("Nothing new."))
    await drive(planner, session, member, "And now?")
    assert model.turn_requests[-1].messages[-1].kind == "human"


async def test_a_call_that_writes_runs_after_its_answer_is_stored_and_reads_before(
    planner, model, session, member, monkeypatch
):
    stored_when_called = {}
    real_call_tool = steps.call_tool

    def call_tool(name, arguments, context):
        stored_when_called[name] = list(
            Message.objects.filter(session=context.session_id).values_list("kind", flat=True)
        )
        return real_call_tool(name, arguments, context)

    monkeypatch.setattr(steps, "call_tool", call_tool)
    proposal = {
        "title": "Docs",
        "operations": [{"op": "create", "kind": "ticket", "fields": {"title": "Write docs"}}],
    }
    model.add(call("list_items", {}), call("propose_changeset", proposal), say("Proposed."))
    await drive(planner, session, member, "Plan docs")
    # A round that only reads is stored with its results once the calls ran: a process dying
    # meanwhile leaves nothing. One that writes has its answer stored before the call changes anything.
    assert stored_when_called["list_items"] == ["human"]
    assert stored_when_called["propose_changeset"] == [
        "human",
        "assistant",
        "tool_results",
        "assistant",
    ]
    assert await kinds_of(session) == [
        "human",
        "assistant",
        "tool_results",
        "assistant",
        "tool_results",
        "assistant",
    ]


async def test_a_round_of_tool_calls_reads_the_humans_access_once(
    planner, model, session, member, monkeypatch
):
    reads = []
    real_access_loaded = permissions.access_loaded

    def access_loaded(user_ids, rows):  # every read of access ends here, its own or pipelined
        reads.append(sorted(user_ids))
        return real_access_loaded(user_ids, rows)

    monkeypatch.setattr(permissions, "access_loaded", access_loaded)
    monkeypatch.setattr(rows, "access_loaded", access_loaded)
    model.add(
        call("list_items", {}, ("list_runnable", {}), ("list_skills", {})),
        call("list_items", {}),
        say("Done."),
    )
    await drive(planner, session, member, "Survey")
    # Starting the turn, then one read per round of calls (three calls, then one).
    assert reads == [[member.pk]] * 3
    results = await sync(
        lambda: [m.content for m in Message.objects.filter(session=session, kind="tool_results")]
    )()
    assert [len(r) for r in results] == [3, 1]
    assert not any(block.get("is_error") for result in results for block in result)


async def test_a_round_of_reading_calls_reads_what_they_ask_for_at_once_and_answers_as_alone(
    planner, model, session, member, make_item, monkeypatch
):
    beta = await sync(make_item)(kind="milestone", title="Beta")
    await sync(make_item)(title="Login page", state="ready", milestone=beta)
    served: list[int] = []
    one, every = sql._read_ahead, sql._all_read_ahead

    def read_ahead(statement, params):  # within a round's reading ahead: was it served?
        found = one(statement, params)
        if sql._ahead.get() is not None:
            served.append(found is not None)
        return found

    def all_read_ahead(statements):
        found = every(statements)
        if sql._ahead.get() is not None:
            served.extend([found is not None] * len(statements))
        return found

    monkeypatch.setattr(sql, "_read_ahead", read_ahead)
    monkeypatch.setattr(sql, "_all_read_ahead", all_read_ahead)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_runnable", {}),
        ("get_item", {"key": "BAL-1"}),
        ("list_items", {"limit": 20}),
    ]
    model.add(call(calls[0][0], calls[0][1], *calls[1:]), say("Done."))
    await drive(planner, session, member, "Survey")
    # The human's access and the six statements of the three calls (get_item's four: the item with its
    # claim, its dependencies, its reports, its comments), each read ahead and served
    assert served == [True] * 7
    (results,) = await sync(
        lambda: [m.content for m in Message.objects.filter(session=session, kind="tool_results")]
    )()
    context = ToolContext(user=member, project=session.project)
    alone = await sync(lambda: [call_tool(name, args, context).content for name, args in calls])()
    assert [block["content"] for block in results] == alone
    assert not any(block.get("is_error") for block in results)
    assert '"Login page"' in alone[0]
    assert '"Beta"' in alone[1]


async def test_calls_read_ahead_are_refused_to_a_human_removed_while_the_model_answered(
    planner, model, session, member, make_item
):
    await sync(make_item)(title="Login page", state="ready")

    def remove_member() -> None:
        Membership.objects.filter(user=member, project=session.project).delete()
        connection.close()

    def removed_meanwhile(request):
        # Gone while the model answered, before the removal's stop reached the turn.
        remover = threading.Thread(target=remove_member)
        remover.start()
        remover.join()
        return call("list_runnable", {}, ("get_item", {"key": "BAL-1"}))

    model.add(removed_meanwhile, say("Done."))
    await drive(planner, session, member, "Survey")
    (results,) = await sync(
        lambda: [m.content for m in Message.objects.filter(session=session, kind="tool_results")]
    )()
    assert [json.loads(block["content"])["error"]["code"] for block in results] == ["permission_denied"] * 2


async def test_each_model_call_works_out_what_it_sends_once(planner, model, session, member, monkeypatch):
    worked_out = []
    real = compaction.request_messages

    def request_messages(messages, summary, summary_up_to, replay):
        worked_out.append(len(messages))
        return real(messages, summary, summary_up_to, replay)

    monkeypatch.setattr(compaction, "request_messages", request_messages)
    model.add(call("list_items", {}), say("Done."))
    await drive(planner, session, member, "Survey")
    # The compaction check and the call after it share the work: once per call, the second call
    # with the first one's answer and its results added.
    assert worked_out == [1, 3]
    assert [len(r.messages) for r in model.requests] == [1, 3]


async def test_a_stop_right_after_the_message_stops_before_any_model_call(planner, model, session, member):
    await planner.send(session_id=session.pk, user=member, text="Never mind")
    live = hub.turns.get(session.pk)
    assert live is not None
    live.stop()  # before the turn's task has run at all
    await planner.wait(session.pk)
    assert model.requests == []
    assert (await events_of(session))[-1] == ("turn_ended", {"reason": "stopped"})
    assert await state_of(session) == "idle"


async def test_a_stop_during_the_first_model_call_keeps_the_history_valid(planner, model, session, member):
    hang = Hang()
    model.add(hang)
    await planner.send(session_id=session.pk, user=member, text="Never mind")
    await hang.started.wait()
    assert await planner.stop(session_id=session.pk, user=member) is True
    await planner.wait(session.pk)
    assert (await events_of(session))[-1] == ("turn_ended", {"reason": "stopped"})
    assert await kinds_of(session) == ["human"]
    model.add(say("Fine."))
    await drive(planner, session, member, "Go on")
    assert [m.kind for m in model.turn_requests[-1].messages] == ["human", "human"]


async def test_an_answer_cut_off_inside_its_only_tool_call_leaves_nothing_half_written(
    planner, model, session, member
):
    cut = Answer(calls=(("get_item", {"_unparsable_input": '{"key": "BA'}),), stop_reason="max_tokens")
    model.add(cut)
    await drive(planner, session, member, "Tell me about BAL-1")
    kind, data = (await events_of(session))[-1]
    assert (kind, data["reason"]) == ("turn_ended", "failed")
    assert "max_tokens" in data["error"]
    assert await kinds_of(session) == ["human"]
    assert await sync(ToolCall.objects.filter(session=session).count)() == 0
    model.add(say("BAL-1 is the login page."))
    await drive(planner, session, member, "Briefly, please")  # the scripted model checks the history
    assert [m.kind for m in model.turn_requests[-1].messages] == ["human", "human"]
    assert await state_of(session) == "idle"


async def test_settling_waits_for_what_follows_a_turn(planner, model, session, member, monkeypatch):
    """After its end a turn's task looks for work that waited for a free turn: a test, or a
    worker shutting down, that settles the runner waits for that read too."""
    reading = threading.Event()
    looked = []

    def slow_look() -> bool:
        reading.set()
        time.sleep(0.3)
        looked.append(True)
        return False

    monkeypatch.setattr(runner_module, "work_waiting", slow_look)
    model.add(say("Done."))
    await planner.send(session_id=session.pk, user=member, text="Hello")
    assert await asyncio.to_thread(reading.wait, 10)
    assert hub.turns.get(session.pk) is None  # the turn is over, the read after it is not
    await planner.settle()
    assert looked == [True]
