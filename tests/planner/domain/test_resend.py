"""Retry a failed or stopped turn, edit and send again the last message nothing answered, and
unarchive (docs/protocol.md#retry-and-edit): the runner, the WebSocket and REST.

What the model is sent is read from the scripted gateway's requests (each checked against the
Messages API's rules by ``assert_valid_history``): a superseded message is never in them.
"""

from __future__ import annotations

import pytest

from planner.agent.calls import GatewayError
from planner.domain.selectors import session_history
from planner.domain.services import sessions
from planner.domain.services.agent_questions import question_create
from planner.domain.services.chats import session_archive
from planner.domain.services.sessions.resend import (
    NotEditableError,
    NotRetryableError,
    session_edit,
    session_retry,
)
from planner.live.hub import hub
from planner.live.runner import runner
from planner.models import Event, Message, Session
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tests.fakes.scripted import Hang, call, say
from tests.planner.api_client import client_for as token_client
from tests.planner.conftest import drive, frames_until, open_socket, sync
from tracker.errors import (
    InvalidStateError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    ValidationError,
)
from tracker.services.activity import Actor
from tracker.services.projects import membership_remove

pytestmark = pytest.mark.django_db(transaction=True)

FAILURE = GatewayError("api_error", "The model is unavailable.")


def texts(request) -> list[str]:
    return [m.text for m in request.messages]


async def rows(session) -> list[tuple[int, str, str, bool]]:
    def read():
        found = Message.objects.filter(session=session).order_by("seq")
        return [(m.seq, m.kind, "".join(b.get("text", "") for b in m.content), m.superseded) for m in found]

    return await sync(read)()


async def last_end(session) -> dict:
    def read():
        return Event.objects.filter(session=session, kind="turn_ended").order_by("-pk")[0].data

    return await sync(read)()


async def failed_turn(planner, model, session, user, text="Plan the release") -> None:
    model.add(FAILURE)
    await drive(planner, session, user, text)
    assert await last_end(session) == {"reason": "failed", "error": "The model is unavailable."}


# ---------------------------------------------------------------- retry


async def test_retry_answers_the_last_message_again_without_a_new_one(planner, model, session, member):
    await failed_turn(planner, model, session, member)
    model.add(say("Here is the plan."))
    done = await planner.retry(session_id=session.pk, user=member)
    await planner.wait(session.pk)
    assert (done.begin.turn, done.begin.message, done.superseded) == (2, None, [])
    assert texts(model.turn_requests[-1]) == ["Plan the release"]
    assert await rows(session) == [
        (1, "human", "Plan the release", False),
        (2, "assistant", "Here is the plan.", False),
    ]
    assert await last_end(session) == {"reason": "completed"}
    started = await sync(
        lambda: Event.objects.filter(session=session, kind="turn_started").order_by("-pk")[0].data
    )()
    assert started["retry"] is True


async def test_retry_supersedes_the_text_a_failed_turn_kept(planner, model, session, member):
    """A stream that broke off keeps its partial text (the human saw it): the retry supersedes it,
    so the model answers the human's message again instead of seeing a half answer of its own."""
    model.add(call("list_items", text="Let me look."), say("So far", stop_reason="max_tokens"))
    await drive(planner, session, member, "What is planned?")
    assert (await last_end(session))["reason"] == "failed"
    model.add(say("Three epics are planned."))
    done = await planner.retry(session_id=session.pk, user=member)
    await planner.wait(session.pk)
    assert done.superseded == [4]
    sent = model.turn_requests[-1].messages
    assert [m.kind for m in sent] == ["human", "assistant", "tool_results"]  # the tools that ran stay
    assert [(seq, kind, superseded) for seq, kind, _, superseded in await rows(session)] == [
        (1, "human", False),
        (2, "assistant", False),
        (3, "tool_results", False),
        (4, "assistant", True),  # kept for the audit trail
        (5, "assistant", False),
    ]
    audit = await sync(lambda: Event.objects.get(session=session, kind="messages_superseded").data)()
    assert audit == {"seqs": [4], "reason": "retried"}


async def test_retry_after_a_stop_supersedes_the_partial_answer(planner, model, session, member):
    hang = Hang(text="Let me think about the pla")
    model.add(hang)
    await planner.send(session_id=session.pk, user=member, text="Plan the release")
    await hang.started.wait()
    await planner.stop(session_id=session.pk, user=member)
    await planner.wait(session.pk)
    model.add(say("The plan, in full."))
    await planner.retry(session_id=session.pk, user=member)
    await planner.wait(session.pk)
    assert texts(model.turn_requests[-1]) == ["Plan the release"]
    assert [(kind, superseded) for _, kind, _, superseded in await rows(session)] == [
        ("human", False),
        ("assistant", True),
        ("assistant", False),
    ]
    # The next turn, here or elsewhere, never sees the superseded text again.
    hub.histories.take(session.pk)
    model.add(say("Fine."))
    await drive(planner, session, member, "Thanks")
    assert "Let me think about the pla" not in texts(model.turn_requests[-1])


async def test_a_kept_history_from_before_the_retry_is_not_used(planner, model, session, member):
    """Another process may hold the session's history from before the retry (with the text the retry
    superseded): it no longer lines up, and is read again."""
    hang = Hang(text="Half an answer")
    model.add(hang)
    await planner.send(session_id=session.pk, user=member, text="Plan the release")
    await hang.started.wait()
    await planner.stop(session_id=session.pk, user=member)
    await planner.wait(session.pk)
    kept = hub.histories.take(session.pk)
    assert kept is not None
    assert kept.history.messages[-1].text == "Half an answer"
    model.add(say("Whole."))

    def retry_elsewhere():
        done = session_retry(session_id=session.pk, user=member)
        hub.histories.keep(session.pk, kept.history)  # as if this process had kept it meanwhile
        return done

    await sync(retry_elsewhere)()
    row = await sync(Session.objects.get)(pk=session.pk)
    history = await sync(session_history)(session=row)
    assert [m.text for m in history.messages] == ["Plan the release"]


async def test_retry_is_refused_unless_the_last_turn_failed_or_was_stopped(planner, model, session, member):
    with pytest.raises(NotRetryableError, match="Only a turn that failed or was stopped"):
        await planner.retry(session_id=session.pk, user=member)  # no turn yet
    model.add(say("Done."))
    await drive(planner, session, member, "Hello")
    with pytest.raises(NotRetryableError, match="Only a turn that failed or was stopped"):
        await planner.retry(session_id=session.pk, user=member)
    assert model.requests == model.turn_requests[:1]
    assert await sync(lambda: Session.objects.get(pk=session.pk).turn_count)() == 1


async def test_retry_is_refused_while_a_turn_runs(planner, model, session, member):
    await failed_turn(planner, model, session, member)
    hang = Hang(then=say("Answered."))
    model.add(hang)
    await planner.send(session_id=session.pk, user=member, text="Something else")
    await hang.started.wait()
    with pytest.raises(NotRetryableError, match="stop its turn first"):
        await planner.retry(session_id=session.pk, user=member)
    hang.release.set()
    await planner.wait(session.pk)
    assert len(model.turn_requests) == 2


async def test_two_retries_at_once_start_one_turn(planner, model, session, member):
    await failed_turn(planner, model, session, member)
    hang = Hang(then=say("Once."))
    model.add(hang)
    await planner.retry(session_id=session.pk, user=member)
    await hang.started.wait()
    with pytest.raises(NotRetryableError):
        await planner.retry(session_id=session.pk, user=member)  # another tab's click
    hang.release.set()
    await planner.wait(session.pk)
    assert len(model.turn_requests) == 2


async def test_retry_is_for_the_owner_with_planner_chat_alone(planner, model, session, member, users, owner):
    await failed_turn(planner, model, session, member)
    for other in (users["viewer"], users["maintainer"], users["stranger"]):
        with pytest.raises(NotFoundError):
            await planner.retry(session_id=session.pk, user=other)
    await sync(membership_remove)(actor=Actor(user=owner), project=session.project, username=member.username)
    with pytest.raises(NotFoundError):
        await planner.retry(session_id=session.pk, user=member)
    assert len(model.turn_requests) == 1


async def test_retry_counts_against_the_message_rate(planner, model, session, member, limits):
    limits(messages_per_minute=1)
    await failed_turn(planner, model, session, member)
    with pytest.raises(RateLimitedError):
        await planner.retry(session_id=session.pk, user=member)
    assert await sync(lambda: Session.objects.get(pk=session.pk).state)() == "idle"


async def test_an_archived_chat_cannot_be_retried(planner, model, session, member):
    await failed_turn(planner, model, session, member)
    await sync(session_archive)(session_id=session.pk, user=member)
    with pytest.raises(InvalidStateError, match="archived"):
        await planner.retry(session_id=session.pk, user=member)


# ---------------------------------------------------------------- edit


async def test_edit_supersedes_the_unanswered_message_and_starts_its_turn(planner, model, session, member):
    await failed_turn(planner, model, session, member, text="Plan the relase")
    model.add(say("Here is the plan."))
    done = await planner.edit(session_id=session.pk, user=member, seq=1, text="Plan the release")
    await planner.wait(session.pk)
    assert (done.begin.turn, done.begin.message.seq, done.superseded) == (2, 2, [1])
    assert texts(model.turn_requests[-1]) == ["Plan the release"]  # one user message: no typo
    assert await rows(session) == [
        (1, "human", "Plan the relase", True),
        (2, "human", "Plan the release", False),
        (3, "assistant", "Here is the plan.", False),
    ]
    row = await sync(Session.objects.get)(pk=session.pk)
    assert row.title == "Plan the release"  # named after its first words: now the edited ones
    audit = await sync(lambda: Event.objects.get(session=session, kind="messages_superseded").data)()
    assert audit == {"seqs": [1], "reason": "edited", "replaced_by": 2}


async def test_edit_after_a_stop_before_any_output(planner, model, session, member):
    model.add(say("First."))
    await drive(planner, session, member, "Hello")
    hang = Hang()
    model.add(hang)
    await planner.send(session_id=session.pk, user=member, text="Never mind tha")
    await hang.started.wait()
    await planner.stop(session_id=session.pk, user=member)
    await planner.wait(session.pk)
    model.add(say("Understood."))
    await planner.edit(session_id=session.pk, user=member, seq=3, text="Never mind that")
    await planner.wait(session.pk)
    assert texts(model.turn_requests[-1]) == ["Hello", "First.", "Never mind that"]


async def test_an_answered_message_cannot_be_edited(planner, model, session, member):
    model.add(say("Answered."))
    await drive(planner, session, member, "Hello")
    with pytest.raises(NotEditableError, match="answered this message meanwhile"):
        await planner.edit(session_id=session.pk, user=member, seq=1, text="Hi")
    partial = Hang(text="Half")
    model.add(partial)
    await planner.send(session_id=session.pk, user=member, text="More")
    await partial.started.wait()
    await planner.stop(session_id=session.pk, user=member)
    await planner.wait(session.pk)
    with pytest.raises(NotEditableError, match="answered this message meanwhile"):  # partly: retry it
        await planner.edit(session_id=session.pk, user=member, seq=3, text="Much more")
    assert [superseded for *_, superseded in await rows(session)] == [False] * 4


async def test_only_the_last_message_can_be_edited(planner, model, session, member):
    await failed_turn(planner, model, session, member)
    model.add(FAILURE)
    await drive(planner, session, member, "Anyone?")
    with pytest.raises(NotEditableError, match="not your last message"):
        await planner.edit(session_id=session.pk, user=member, seq=1, text="Edited")
    with pytest.raises(NotEditableError, match="not your last message"):
        await planner.edit(session_id=session.pk, user=member, seq=99, text="Edited")


async def test_an_answer_arriving_before_the_edit_refuses_it(planner, model, session, member):
    """The page offered Edit while the turn ran; the answer came first: the edit is refused, and
    nothing is superseded."""
    hang = Hang(then=say("The answer."))
    model.add(hang)
    await planner.send(session_id=session.pk, user=member, text="Hello")
    await hang.started.wait()
    with pytest.raises(NotEditableError, match="stop its turn first"):
        await planner.edit(session_id=session.pk, user=member, seq=1, text="Hi")
    hang.release.set()
    await planner.wait(session.pk)
    with pytest.raises(NotEditableError, match="answered this message meanwhile"):
        await planner.edit(session_id=session.pk, user=member, seq=1, text="Hi")
    assert [superseded for *_, superseded in await rows(session)] == [False, False]


async def test_edit_refuses_bad_input_before_anything_changes(planner, model, session, member):
    await failed_turn(planner, model, session, member)
    for seq, text in [(0, "x"), (True, "x"), ("1", "x"), (1, "   "), (1, "x" * 32_001), (1, 7)]:
        with pytest.raises(ValidationError):
            await sync(session_edit)(session_id=session.pk, user=member, seq=seq, text=text)
    assert [superseded for *_, superseded in await rows(session)] == [False]


async def test_edit_is_for_the_owner_alone(planner, model, session, member, users, chat_project):
    await failed_turn(planner, model, session, member)
    for other in (users["viewer"], users["maintainer"], users["stranger"]):
        with pytest.raises(NotFoundError):
            await planner.edit(session_id=session.pk, user=other, seq=1, text="Mine")
    question = await sync(question_create)(user=member, project=chat_project, text="Is BAL-1 ready?")
    sub_chat = await sync(Session.objects.get)(question=question)
    with pytest.raises(PermissionDeniedError):
        await sync(session_edit)(session_id=sub_chat.pk, user=users["maintainer"], seq=1, text="Mine")


# ---------------------------------------------------------------- the WebSocket


async def test_retry_and_edit_frames_reach_every_watcher(scripted, session, member):
    scripted.add(FAILURE)
    ws = await open_socket(session, member)
    await ws.send_json_to({"type": "message", "text": "Plan the relase"})
    await frames_until(ws, "turn_ended")
    scripted.add(FAILURE)
    await ws.send_json_to({"type": "edit", "seq": 1, "text": "Plan the release"})
    seen = await frames_until(ws, "turn_ended")
    assert [f["type"] for f in seen][:3] == ["superseded", "user_message", "turn_started"]
    assert (seen[0]["seqs"], seen[0]["reason"]) == ([1], "edited")
    assert (seen[1]["seq"], seen[1]["text"], seen[1]["kind"]) == (2, "Plan the release", "human")
    scripted.add(say("Here it is."))
    await ws.send_json_to({"type": "retry"})
    seen = await frames_until(ws, "turn_ended")
    assert seen[0]["type"] == "turn_started"
    assert seen[-1]["reason"] == "completed"
    await ws.send_json_to({"type": "retry"})
    refused = await ws.receive_json_from(timeout=5)
    assert refused["type"] == "error"
    assert refused["code"] == "not_retryable"
    await ws.send_json_to({"type": "edit", "seq": 2, "text": "Again"})
    refused = await ws.receive_json_from(timeout=5)
    assert (refused["type"], refused["code"]) == ("error", "not_editable")
    await ws.disconnect()


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        ({"type": "retry", "seq": 1}, "A retry frame has no field 'seq'"),
        ({"type": "edit", "text": "x"}, "An edit frame names the message it edits"),
        ({"type": "edit", "seq": "1", "text": "x"}, "An edit frame names the message it edits"),
        ({"type": "edit", "seq": True, "text": "x"}, "An edit frame names the message it edits"),
        ({"type": "edit", "seq": 1, "text": " "}, "A message needs a non-empty text."),
        ({"type": "edit", "seq": 1, "text": "x", "kind": "steer"}, "An edit frame has no field 'kind'."),
    ],
)
async def test_bad_retry_and_edit_frames_are_refused(scripted, session, member, frame, message):
    ws = await open_socket(session, member)
    await ws.send_json_to(frame)
    refused = await ws.receive_json_from(timeout=5)
    assert refused["type"] == "error"
    assert refused["code"] == "invalid"
    assert refused["message"].startswith(message)
    await ws.disconnect()


# ---------------------------------------------------------------- REST


def url(session, tail: str = "") -> str:
    return f"/api/v1/planner/sessions/{session.pk}{tail}"


async def test_retry_and_edit_over_rest(scripted, session, member):
    scripted.add(FAILURE, FAILURE, say("Done."))
    client = await token_client(member)
    sent = await client.post(url(session, "/messages/"), {"text": "Plan the relase"})
    assert sent.status_code == 202
    await runner.wait(session.pk)
    edited = await client.post(url(session, "/edit/"), {"seq": 1, "text": "Plan the release"})
    assert edited.status_code == 202, edited.content
    assert edited.json() == {"turn": 2, "seq": 2, "superseded": [1]}
    await runner.wait(session.pk)
    retried = await client.post(url(session, "/retry/"))
    assert retried.status_code == 202, retried.content
    assert retried.json() == {"turn": 3, "seq": None, "superseded": []}
    await runner.wait(session.pk)
    transcript = (await client.get(url(session))).json()
    assert [(m["seq"], m["superseded"]) for m in transcript["messages"]] == [
        (1, True),
        (2, False),
        (3, False),
    ]
    again = await client.post(url(session, "/retry/"))
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "not_retryable"
    late = await client.post(url(session, "/edit/"), {"seq": 2, "text": "Too late"})
    assert late.status_code == 409
    assert late.json()["error"]["code"] == "not_editable"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": "x"}, "seq"),
        ({"seq": "1", "text": "x"}, "seq"),
        ({"seq": 0, "text": "x"}, "seq"),
        ({"seq": 1}, "text"),
        ({"seq": 1, "text": "x", "extra": 1}, "extra"),
    ],
)
def test_a_bad_edit_body_is_refused_with_its_field(client_for, session, member, body, field):
    response = client_for(member).post(url(session, "/edit/"), body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]


def test_others_cannot_retry_or_edit_over_rest(client_for, session, users):
    for who in ("viewer", "maintainer", "stranger"):
        client = client_for(users[who])
        assert client.post(url(session, "/retry/")).status_code == 404, who
        edited = client.post(url(session, "/edit/"), {"seq": 1, "text": "x"}, format="json")
        assert edited.status_code == 404, who


# ---------------------------------------------------------------- unarchive


def test_the_owner_unarchives_a_chat_and_it_takes_messages_again(client_for, session, member):
    client = client_for(member)
    assert client.delete(url(session)).status_code == 204
    archived = client.get("/api/v1/planner/sessions/?archived=true").json()["results"]
    assert [row["id"] for row in archived] == [str(session.pk)]
    back = client.patch(url(session), {"archived": False}, format="json")
    assert back.status_code == 200, back.content
    assert back.json()["archived_at"] is None
    assert client.get("/api/v1/planner/sessions/?archived=true").json()["results"] == []
    assert [row["id"] for row in client.get("/api/v1/planner/sessions/").json()["results"]] == [
        str(session.pk)
    ]
    assert client.patch(url(session), {"archived": False}, format="json").status_code == 200  # no change
    assert client.get(url(session)).json()["can_send"] is True
    assert sessions.session_begin(session_id=session.pk, user=member, text="Back again").meaning == "started"


def test_patch_archives_too_and_refuses_bad_input_before_changing_anything(client_for, session, member):
    client = client_for(member)
    both = client.patch(url(session), {"archived": True, "title": "Done with"}, format="json")
    assert both.status_code == 200
    assert (both.json()["title"], both.json()["archived_at"] is not None) == ("Done with", True)
    bad_title = client.patch(url(session), {"archived": False, "title": "   "}, format="json")
    assert bad_title.status_code == 400
    assert Session.objects.get(pk=session.pk).archived_at is not None  # nothing half-applied
    for body in ({"archived": "false"}, {"archived": 0}, {"archived": None}):
        refused = client.patch(url(session), body, format="json")
        assert refused.status_code == 400, body
        assert "archived" in refused.json()["error"]["fields"]
    empty = client.patch(url(session), {}, format="json")
    assert empty.status_code == 400


def test_only_the_owner_with_planner_chat_unarchives(client_for, session, member, users, owner):
    client_for(member).delete(url(session))
    sibling = ProjectFactory(organization=session.project.organization, key="SIB", name="Sibling")
    next_door = UserFactory(username="next-door")
    MembershipFactory(project=sibling, user=next_door, role="owner")
    for other in (users["viewer"], users["maintainer"], users["owner"], users["stranger"], next_door):
        refused = client_for(other).patch(url(session), {"archived": False}, format="json")
        assert refused.status_code == 404, other.username
    membership_remove(actor=Actor(user=owner), project=session.project, username=member.username)
    assert client_for(member).patch(url(session), {"archived": False}, format="json").status_code == 404
    assert Session.objects.get(pk=session.pk).archived_at is not None
