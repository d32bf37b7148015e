"""Sub-chats the planner drives (SPEC § 13.6, docs/domain.md#sub-chats): start_subchat pauses the
calling turn like a request until every sub-chat it started has ended, then each call's result is
that sub-chat's final answer; Stop stops them; a limit, a sub-chat and bad input are refused.

Sub-chats run in parallel on the one scripted model, so their steps answer by the brief they read
(:func:`by_brief`), whichever asks first.
"""

from __future__ import annotations

import json
import uuid

import pytest

from planner.agent.calls import GatewayError
from planner.agent.messages import ModelRequest, TextBlock
from planner.domain.selectors import session_list
from planner.live.runner import Runner
from planner.models import Event, HumanRequest, Session
from tests.fakes.scripted import Answer, Hang, ScriptedGateway, call, say, tool_results
from tests.planner.api_client import client_for
from tests.planner.conftest import sync
from tracker.errors import ConflictError

pytestmark = pytest.mark.django_db(transaction=True)

PROPOSE = (
    "propose_changeset",
    {"title": "Replan B", "operations": [{"op": "create", "kind": "ticket", "fields": {"title": "B1"}}]},
)


def first_text(request: ModelRequest) -> str:
    block = request.messages[0].content[0]
    assert isinstance(block, TextBlock)
    return block.text


def by_brief(answers: dict[str, Answer]):
    """A step that answers a sub-chat's request by the brief it was started with."""

    def answer(request: ModelRequest) -> Answer:
        return answers[first_text(request)]

    return answer


def start(*briefs: str, **extra) -> Answer:
    calls = [("start_subchat", {"brief": brief, **extra}) for brief in briefs]
    return call(*calls[0], *calls[1:])


async def children(session) -> list[Session]:
    return await sync(lambda: list(Session.objects.filter(parent=session).order_by("created_at")))()


async def run_through(planner: Runner, session, user, text: str = "Replan every epic.") -> None:
    """Send ``text``; wait for the turn, the sub-chats it started, and the turn they resume."""
    await planner.send(session_id=session.pk, user=user, text=text)
    await planner.wait(session.pk)
    for child in await children(session):
        await planner.wait(child.pk)
    await planner.wait(session.pk)
    await planner.settle()


def results(request: ModelRequest) -> list[tuple[dict, bool]]:
    return [(json.loads(r.content), r.is_error) for r in tool_results(request)]


async def test_two_subchats_answer_and_the_next_call_carries_both_answers(
    planner, model: ScriptedGateway, session, member
):
    model.add(
        start("Replan epic A", "Replan epic B", title="Epic replan"),
        by_brief({"Replan epic A": say("A is fine."), "Replan epic B": call(*PROPOSE)}),
        by_brief({"Replan epic A": say("A is fine."), "Replan epic B": call(*PROPOSE)}),
        say("B: proposed changeset."),
        say("Both epics are replanned."),
    )
    await run_through(planner, session, member)

    a, b = await children(session)
    assert (a.parent_id, a.project_id, a.user_id, a.title) == (
        session.pk,
        session.project_id,
        member.pk,
        "Epic replan",
    )
    assert (a.state, b.state) == ("idle", "idle")
    last = model.turn_requests[-1]
    assert first_text(last) == "Replan every epic."
    (first, first_error), (second, second_error) = results(last)
    assert not first_error
    assert not second_error
    assert (first["session"], first["outcome"], first["answer"], first["changesets"]) == (
        str(a.pk),
        "completed",
        "A is fine.",
        [],
    )
    assert (second["session"], second["answer"]) == (str(b.pk), "B: proposed changeset.")
    assert len(second["changesets"]) == 1
    parent = await sync(Session.objects.get)(pk=session.pk)
    assert parent.state == "idle"
    kinds = await sync(lambda: list(Event.objects.filter(session=session).values_list("kind", flat=True)))()
    # The sub-chat's changeset reaches the parent as a change note, like anyone's.
    turn_kinds = [kind for kind in kinds if kind != "changes_noted"]
    assert turn_kinds == ["turn_started", "turn_paused", "turn_started", "turn_ended"]
    # The sub-chat ran its brief as its first message, with the sub-chat's instructions.
    child_calls = [r for r in model.turn_requests if first_text(r) == "Replan epic A"]
    assert child_calls
    assert "This chat is a sub-chat" in child_calls[0].system


async def test_the_sessions_api_lists_a_chats_subchats(planner, model, session, member):
    model.add(start("Replan epic A"), say("Done A."), say("All done."))
    await run_through(planner, session, member)
    (child,) = await children(session)
    client = await client_for(member)

    listed = await client.get(f"/api/v1/planner/sessions/?parent={session.pk}")
    assert listed.status_code == 200, listed.content
    assert [row["id"] for row in listed.json()["results"]] == [str(child.pk)]
    assert listed.json()["results"][0]["parent"] == str(session.pk)
    assert (await client.get(f"/api/v1/planner/sessions/?parent={child.pk}")).json()["results"] == []
    assert (await client.get("/api/v1/planner/sessions/?parent=")).json()["error"]["fields"] == {
        "parent": ["A chat's id (a UUID)."]
    }
    bad = await client.get("/api/v1/planner/sessions/?parent=not-a-uuid")
    assert bad.status_code == 400
    assert (await client.get(f"/api/v1/planner/sessions/?parent={uuid.uuid4()}")).status_code == 404


async def test_stop_on_the_parent_stops_a_hanging_subchat(planner, model, session, member):
    hang = Hang("Reading the epic")
    model.add(start("Replan epic A"), hang)
    await planner.send(session_id=session.pk, user=member, text="Replan.")
    await planner.wait(session.pk)
    await hang.started.wait()
    (child,) = await children(session)
    assert (await sync(Session.objects.get)(pk=child.pk)).state == "running"

    assert await planner.stop(session_id=session.pk, user=member) is True
    await planner.wait(child.pk)
    await planner.settle()

    both = [session.pk, child.pk]
    states = await sync(lambda: dict(Session.objects.filter(pk__in=both).values_list("pk", "state")))()
    assert states == {session.pk: "idle", child.pk: "idle"}
    ended = Event.objects.filter(kind="turn_ended", session__in=both)
    ends = await sync(lambda: {e.session_id: e.data["reason"] for e in ended})()
    assert ends == {session.pk: "stopped", child.pk: "stopped"}
    request = await sync(HumanRequest.objects.get)(session=session)
    assert (request.kind, request.status) == ("subchat", "cancelled")


async def test_the_limit_refuses_a_fourth_subchat(planner, model, session, member):
    briefs = ["Epic A", "Epic B", "Epic C", "Epic D"]
    answers = {brief: say(f"{brief} done.") for brief in briefs}
    model.add(start(*briefs), *(by_brief(answers) for _ in range(3)), say("Three done, one refused."))
    await run_through(planner, session, member)

    assert len(await children(session)) == 3
    got = results(model.turn_requests[-1])
    assert [body.get("answer") for body, error in got[:3]] == ["Epic A done.", "Epic B done.", "Epic C done."]
    assert not any(error for _, error in got[:3])
    refused, is_error = got[3]
    assert is_error
    assert refused["error"]["code"] == "too_many_subchats"
    assert "At most 3 sub-chats" in refused["error"]["message"]


async def test_a_split_that_runs_away_round_after_round_is_refused_past_the_limit(
    planner, model, session, member
):
    answers = {brief: say(f"{brief} done.") for brief in ["Epic A", "Epic B", "Epic C", "Epic D"]}
    model.add(
        start("Epic A", "Epic B"),
        *(by_brief(answers) for _ in range(2)),
        start("Epic C", "Epic D"),  # the next round: one more fits the turn, the other does not
        by_brief(answers),
        say("Three done, one refused."),
    )
    await planner.send(session_id=session.pk, user=member, text="Replan every epic.")
    for _ in range(3):
        await planner.wait(session.pk)
        for child in await children(session):
            await planner.wait(child.pk)
    await planner.wait(session.pk)
    await planner.settle()

    assert len(await children(session)) == 3
    got = results(model.turn_requests[-1])[-2:]  # the second round's
    assert (got[0][0]["answer"], got[0][1]) == ("Epic C done.", False)
    refused, is_error = got[1]
    assert is_error
    assert refused["error"]["code"] == "too_many_subchats"
    assert "At most 3 sub-chats start in one turn" in refused["error"]["message"]


async def test_a_subchat_cannot_start_one(planner, model, session, member):
    model.add(
        start("Epic A"),
        start("Epic A, part one"),  # the sub-chat tries
        say("I did it myself."),
        say("Done."),
    )
    await run_through(planner, session, member)

    (child,) = await children(session)
    assert await children(child) == []
    child_second = model.turn_requests[2]
    assert first_text(child_second) == "Epic A"
    ((refused, is_error),) = results(child_second)
    assert is_error
    assert refused["error"]["code"] == "invalid_state"
    assert "A sub-chat starts no sub-chats" in refused["error"]["message"]
    ((answered, error),) = results(model.turn_requests[-1])
    assert (answered["answer"], error) == ("I did it myself.", False)


async def test_bad_input_is_a_tool_error_the_model_can_correct(planner, model, session, member):
    model.add(
        call(
            "start_subchat",
            {"brief": ""},
            ("start_subchat", {"brief": "   "}),
            ("start_subchat", {"brief": "x" * 16_001}),
            ("start_subchat", {"brief": "a\x00b"}),
            ("start_subchat", {"brief": "ok", "colour": "red"}),
            ("start_subchat", {"brief": "ok", "item": "NOPE-1"}),
        ),
        say("Let me fix that."),
    )
    await run_through(planner, session, member)

    assert await children(session) == []
    got = results(model.turn_requests[-1])
    assert len(got) == 6
    assert all(error for _, error in got)
    assert [body["error"]["code"] for body, _ in got] == ["invalid_input"] * 5 + ["not_found"]
    messages = [body["error"]["message"] for body, _ in got]
    assert all(message.startswith("brief") for message in messages[:4]), messages
    assert "NUL characters are not allowed" in messages[3]
    assert "colour" in messages[4]
    assert "There is no item NOPE-1" in messages[5]
    assert (await sync(Session.objects.get)(pk=session.pk)).state == "idle"


async def test_a_failed_subchat_says_so(planner, model, session, member):
    model.add(
        start("Epic A"), GatewayError("bad_request", "The model rejected the request."), say("It failed.")
    )
    await run_through(planner, session, member)

    ((failed, is_error),) = results(model.turn_requests[-1])
    assert is_error
    assert (failed["outcome"], failed["error"]["code"]) == ("failed", "subchat_failed")
    assert "The model rejected the request." in failed["error"]["message"]


async def test_a_parent_waiting_for_subchats_waits_for_no_human(planner, model, session, member):
    hang = Hang("Reading the epic")
    model.add(start("Replan epic A"), hang)
    await planner.send(session_id=session.pk, user=member, text="Replan.")
    await planner.wait(session.pk)
    await hang.started.wait()
    request = await sync(HumanRequest.objects.get)(session=session)

    with pytest.raises(ConflictError, match="waits for its sub-chats"):
        await planner.send(session_id=session.pk, user=member, text="Hurry up.")
    with pytest.raises(ConflictError, match="waits for its sub-chats"):
        await planner.reply(session_id=session.pk, user=member, request=str(request.pk), text="Done.")

    def waiting() -> dict:
        return dict(session_list(user=member).values_list("pk", "waiting"))  # type: ignore[misc]

    listed = await sync(waiting)()
    assert listed[session.pk] is False

    assert await planner.stop(session_id=session.pk, user=member) is True
    (child,) = await children(session)
    await planner.wait(child.pk)
    await planner.settle()
