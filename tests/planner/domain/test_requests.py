"""A turn paused on a human (docs/domain.md): ask_human, approvals, replies, stop, restart.

The scripted model checks the history of every request it gets, so each test
that resumes a turn also shows the history stayed valid through the pause.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User

from planner.domain.selectors import session_list
from planner.domain.services import sessions
from planner.live.hub import hub
from planner.live.runner import Runner
from planner.models import Event, HumanRequest, Session, ToolCall
from tests.fakes.scripted import ScriptedGateway, call, say, tool_results
from tests.planner.api_client import client_for
from tests.planner.conftest import frames_until, open_socket, sync
from tracker.errors import ConflictError, NotFoundError, ValidationError
from tracker.models import Changeset
from tracker.services.activity import Actor
from tracker.services.projects import project_update

pytestmark = pytest.mark.django_db(transaction=True)

ASK = ("ask_human", {"question": "Ship on Friday or Monday?", "options": ["Friday", "Monday"]})


async def pause(planner: Runner, session, user, *steps) -> HumanRequest:
    """Send a message whose turn pauses on ``steps``' requests; the first pending request."""
    model = planner.gateway
    assert isinstance(model, ScriptedGateway)
    model.add(*steps)
    await planner.send(session_id=session.pk, user=user, text="Plan the release.")
    await planner.wait(session.pk)
    pending = await sync(lambda: list(HumanRequest.objects.filter(session=session, status="pending")))()
    assert pending, "the turn did not pause"
    return pending[0]


async def state_of(session) -> str:
    return await sync(lambda: Session.objects.get(pk=session.pk).state)()


async def test_ask_human_pauses_and_an_answer_resumes_with_it_as_the_result(planner, model, session, member):
    request = await pause(planner, session, member, call(*ASK))
    assert (request.kind, request.question, request.options) == (
        "question",
        ASK[1]["question"],
        ["Friday", "Monday"],
    )
    assert await state_of(session) == "paused"
    model.add(say("Monday it is."))
    resolution = await planner.reply(
        session_id=session.pk, user=member, request=str(request.pk), text="Monday"
    )
    await planner.wait(session.pk)
    assert resolution.begin is not None
    assert [f["type"] for f in resolution.frames] == ["request_resolved", "tool_result"]
    (result,) = tool_results(model.turn_requests[-1])
    assert json.loads(result.content) == {"answer": "Monday", "answered_by": "member"}
    assert not result.is_error
    assert await state_of(session) == "idle"
    kinds = await sync(lambda: list(Event.objects.filter(session=session).values_list("kind", flat=True)))()
    assert kinds == ["turn_started", "turn_paused", "turn_started", "turn_ended"]


async def test_a_plain_message_answers_the_questions_of_a_paused_turn(planner, model, session, member):
    await pause(planner, session, member, call(*ASK))
    model.add(say("Friday then."))
    begin = await planner.send(session_id=session.pk, user=member, text="Friday, after the demo")
    await planner.wait(session.pk)
    assert begin.meaning == "continued"
    assert begin.message is None
    (result,) = tool_results(model.turn_requests[-1])
    assert json.loads(result.content)["answer"] == "Friday, after the demo"
    request = await sync(HumanRequest.objects.get)(session=session)
    assert (request.status, request.answered_by_id) == ("answered", member.pk)


async def test_the_answer_frame_answers_and_every_watcher_sees_the_request_and_its_resolution(
    scripted, session, member
):
    scripted.add(call(*ASK))
    ws = await open_socket(session, member)
    other = await open_socket(session, member)
    await ws.send_json_to({"type": "message", "text": "Plan the release."})
    got = await frames_until(ws, "request")
    assert got[-1]["kind"] == "question"
    assert got[-1]["options"] == ["Friday", "Monday"]
    assert "turn_ended" not in [f["type"] for f in got]
    seen = await frames_until(other, "request")
    request_id = seen[-1]["id"]
    # A page that connects now gets the state, then the pending request.
    late = await open_socket_raw(session, member)
    assert (await late.receive_json_from())["state"] == "paused"
    replayed = await late.receive_json_from()
    assert (replayed["type"], replayed["id"]) == ("request", request_id)
    scripted.add(say("Friday."))
    await ws.send_json_to({"type": "answer", "request": request_id, "text": "Friday"})
    for socket in (ws, other, late):
        done = await frames_until(socket, "turn_ended")
        resolved = next(f for f in done if f["type"] == "request_resolved")
        assert (resolved["id"], resolved["outcome"], resolved["by"]) == (request_id, "answered", "member")
        assert done[-1]["reason"] == "completed"
    for socket in (ws, other, late):
        await socket.disconnect()


async def open_socket_raw(session, user):
    from channels.routing import URLRouter  # noqa: PLC0415
    from channels.testing import WebsocketCommunicator  # noqa: PLC0415

    from planner.web.routing import websocket_urlpatterns  # noqa: PLC0415
    from tests.planner.conftest import ws_path  # noqa: PLC0415

    ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), ws_path(session))
    ws.scope["user"] = user
    connected, _ = await ws.connect()
    assert connected
    return ws


async def test_bad_answer_frames_get_an_error_and_the_request_stays(scripted, session, member):
    scripted.add(call(*ASK))
    ws = await open_socket(session, member)
    await ws.send_json_to({"type": "message", "text": "Plan the release."})
    request_id = (await frames_until(ws, "request"))[-1]["id"]
    for bad in (
        {"type": "answer", "request": request_id},
        {"type": "answer", "request": request_id, "text": "x", "approve": True},
        {"type": "answer", "request": 7, "text": "x"},
        {"type": "answer", "request": request_id, "approve": True},
        {"type": "answer", "request": "not-a-uuid", "text": "x"},
        {"type": "answer", "request": request_id, "text": "   "},
        {"type": "answer", "request": request_id, "text": "x", "extra": 1},
    ):
        await ws.send_json_to(bad)
        frame = await ws.receive_json_from(timeout=5)
        assert frame["type"] == "error", (bad, frame)
    assert await state_of(session) == "paused"
    await ws.disconnect()


async def test_an_approved_call_runs_exactly_once_as_the_owner(
    planner, model, chat_project, owner, session, member
):
    await sync(project_update)(
        actor=Actor(user=owner), project=chat_project, settings={"approve_tools": ["propose_changeset"]}
    )
    proposal = {
        "title": "Add export",
        "rationale": "Users ask for it.",
        "operations": [{"op": "create", "ref": "x", "kind": "ticket", "fields": {"title": "Export CSV"}}],
    }
    request = await pause(
        planner, session, member, call("propose_changeset", proposal, ("list_runnable", {}))
    )
    assert (request.kind, request.tool, request.input) == ("approval", "propose_changeset", proposal)
    assert await sync(Changeset.objects.count)() == 0  # nothing ran
    # list_runnable, asked beside it, ran at once
    assert await sync(lambda: list(ToolCall.objects.values_list("name", flat=True)))() == ["list_runnable"]
    model.add(say("Proposed."))
    resolution = await planner.reply(
        session_id=session.pk, user=member, request=str(request.pk), approve=True
    )
    await planner.wait(session.pk)
    assert [f["type"] for f in resolution.frames] == ["request_resolved", "tool_result", "draft"]
    assert await sync(Changeset.objects.count)() == 1
    number = await sync(lambda: Changeset.objects.get().number)()
    assert resolution.frames[-1]["artifact_id"] == f"changeset:{number}"
    results = tool_results(model.turn_requests[-1])
    assert [r.is_error for r in results] == [False, False]
    with pytest.raises(ConflictError):
        await planner.reply(session_id=session.pk, user=member, request=str(request.pk), approve=True)
    assert await sync(Changeset.objects.count)() == 1


@pytest.mark.parametrize("how", ["decline", "message"])
async def test_a_declined_call_runs_nothing_and_the_model_gets_the_reason(
    planner, model, chat_project, owner, session, member, how
):
    await sync(project_update)(
        actor=Actor(user=owner), project=chat_project, settings={"approve_tools": ["create_knowledge"]}
    )
    note = {"kind": "note", "title": "Release notes", "body": "..."}
    request = await pause(planner, session, member, call("create_knowledge", note))
    model.add(say("Understood."))
    if how == "decline":
        await planner.reply(
            session_id=session.pk, user=member, request=str(request.pk), approve=False, reason="Not yet"
        )
    else:
        await planner.send(session_id=session.pk, user=member, text="Not yet")
    await planner.wait(session.pk)
    (result,) = tool_results(model.turn_requests[-1])
    assert result.is_error
    assert json.loads(result.content)["error"]["message"] == "declined by the human: Not yet"
    assert await sync(ToolCall.objects.count)() == 0
    from knowledge.models import KnowledgeEntry  # noqa: PLC0415

    assert await sync(KnowledgeEntry.objects.count)() == 0


async def test_stopping_a_paused_turn_cancels_its_requests_and_the_next_message_works(
    planner, model, session, member
):
    request = await pause(planner, session, member, call(*ASK, ("list_runnable", {})))
    assert await planner.stop(session_id=session.pk, user=member) is True
    assert await state_of(session) == "idle"
    request = await sync(HumanRequest.objects.get)(pk=request.pk)
    assert request.status == "cancelled"
    model.add(say("Hello again."))
    await planner.send(session_id=session.pk, user=member, text="Start over.")
    await planner.wait(session.pk)
    results = tool_results(model.turn_requests[-1])  # the cancelled round's, in the history sent
    assert [r.is_error for r in results] == [True, False]
    with pytest.raises(ConflictError):
        await planner.reply(session_id=session.pk, user=member, request=str(request.pk), text="late")


async def test_a_pending_request_survives_a_restart_and_is_not_recovered_as_dead(
    planner, model, session, member
):
    request = await pause(planner, session, member, call(*ASK))
    hub.histories.take(session.pk)  # a new process has no history kept
    assert await sync(sessions.sessions_recover_dead)() == []
    restarted = Runner(gateway=model)
    model.add(say("Got it."))
    await restarted.reply(session_id=session.pk, user=member, request=str(request.pk), text="Monday")
    await restarted.wait(session.pk)
    assert await state_of(session) == "idle"
    (result,) = tool_results(model.turn_requests[-1])
    assert json.loads(result.content)["answer"] == "Monday"


async def test_who_may_answer(planner, model, session, member, viewer, owner, users, other_project):
    request = await pause(planner, session, member, call(*ASK))
    for stranger in (viewer, owner):  # a viewer, and the project's owner: not this session's
        with pytest.raises(NotFoundError):
            await planner.reply(session_id=session.pk, user=stranger, request=str(request.pk), text="x")
    with pytest.raises(NotFoundError):
        await planner.reply(
            session_id=session.pk, user=member, request="00000000-0000-0000-0000-000000000000", text="x"
        )
    with pytest.raises(ValidationError):
        await planner.reply(session_id=session.pk, user=member, request=str(request.pk), approve=True)
    assert await state_of(session) == "paused"
    listed = await sync(lambda: list(session_list(user=member)))()
    waiting = [(s.pk, s.waiting) for s in listed]
    assert waiting == [(session.pk, True)]
    # A superuser sees the chat, but its question is for its owner alone: it does not wait for them.
    admin = await sync(User.objects.create_superuser)("root", "root@example.com", "pw")
    listed = await sync(lambda: list(session_list(user=admin)))()
    assert [(s.pk, s.waiting) for s in listed] == [(session.pk, False)]


async def test_answers_over_rest(scripted, session, member, viewer):
    scripted.add(call(*ASK))
    client = await client_for(member)
    sent = await client.post(
        f"/api/v1/planner/sessions/{session.pk}/messages/", {"text": "Plan the release."}
    )
    assert sent.status_code == 202
    from planner.live.runner import runner  # noqa: PLC0415

    await runner.wait(session.pk)
    body = (await client.get(f"/api/v1/planner/sessions/{session.pk}")).json()
    assert body["state"] == "paused"
    assert body["waiting"] is True
    assert body["can_send"] is True
    (pending,) = body["requests"]
    assert (pending["kind"], pending["status"], pending["options"]) == (
        "question",
        "pending",
        ["Friday", "Monday"],
    )
    bad = await client.post(
        f"/api/v1/planner/sessions/{session.pk}/answers/", {"request": pending["id"], "approve": 1}
    )
    assert bad.status_code == 400
    refused = await (await client_for(viewer)).post(
        f"/api/v1/planner/sessions/{session.pk}/answers/", {"request": pending["id"], "text": "Monday"}
    )
    assert refused.status_code == 404
    scripted.add(say("Monday."))
    answered = await client.post(
        f"/api/v1/planner/sessions/{session.pk}/answers/", {"request": pending["id"], "text": "Monday"}
    )
    assert answered.status_code == 200, answered.content
    assert answered.json() == {"outcome": "answered", "resumed": True, "waiting": None}
    await runner.wait(session.pk)
    again = await client.post(
        f"/api/v1/planner/sessions/{session.pk}/answers/", {"request": pending["id"], "text": "Monday"}
    )
    assert again.status_code == 409
    body = (await client.get(f"/api/v1/planner/sessions/{session.pk}")).json()
    assert body["state"] == "idle"
    assert body["requests"][0]["status"] == "answered"
    assert body["requests"][0]["by"] == "member"


async def test_an_invalid_ask_is_an_error_result_and_no_pause(planner, model, session, member):
    model.add(call("ask_human", {"question": ""}), say("Sorry."))
    await planner.send(session_id=session.pk, user=member, text="Hi")
    await planner.wait(session.pk)
    (result,) = tool_results(model.turn_requests[-1])
    assert result.is_error
    assert json.loads(result.content)["error"]["code"] == "invalid_input"
    assert await sync(HumanRequest.objects.count)() == 0
    assert await state_of(session) == "idle"
