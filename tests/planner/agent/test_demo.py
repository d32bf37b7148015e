"""The demo planner (docs/architecture.md#the-demo-planner): its scripts against the real loop and
tools, the provider a project's turns use, and an agent's question it escalates to a human."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from decimal import Decimal
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from knowledge.services import knowledge_create
from planner.agent.calls import CallRecord
from planner.agent.demo import DEMO_MODEL, DemoGateway, deltas, script
from planner.agent.loop import History
from planner.agent.messages import ChatMessage, ModelRequest, TextBlock
from planner.agent.providers import ProviderGateway
from planner.domain.selectors import project_provider, turn_setup
from planner.domain.services.sessions import session_create
from planner.domain.services.spend import usage_rows_priced
from planner.live.runner import runner
from planner.models import Event, HumanRequest, Message, Question, Session, ToolCall, UsageRecord
from tests.fakes.scripted import ScriptedGateway, say
from tests.planner.api_client import client_for
from tests.planner.conftest import frames_until, open_socket, sync
from tests.planner.web.test_questions import QUESTIONS, waiters
from tracker.models import Changeset, Project
from tracker.services.activity import Actor
from tracker.services.projects import project_update

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_server_key(settings):
    """No ANTHROPIC_API_KEY on the server: a project without a credential gets the demo planner."""
    settings.SERVER = dataclasses.replace(settings.SERVER, anthropic_api_key=None)


@pytest.fixture
def demo(no_server_key):
    """The process's runner on the provider gateway it starts with: the demo planner, and a scripted
    model in Anthropic's place (for projects with a credential)."""
    model = ScriptedGateway()
    previous = runner._gateway
    runner.gateway = ProviderGateway(anthropic=model, demo=DemoGateway(pause=0))
    yield model
    runner.gateway = previous


@pytest.fixture
def chat(project, member, no_server_key):
    """A chat of ``member`` in a project with no credential anywhere."""
    return session_create(user=member, project=project)


async def turn(session, user, text: str) -> tuple[list[dict], str]:
    """Send ``text`` over the WebSocket: the turn's frames and the text it streamed."""
    ws = await open_socket(session, user)
    await ws.send_json_to({"type": "message", "text": text})
    got = await frames_until(ws, "turn_ended")
    await ws.disconnect()
    await runner.wait(session.pk)
    assert got[-1]["reason"] == "completed", got[-1]
    return got, "".join(f["text"] for f in got if f["type"] == "text_delta")


async def calls_of(session) -> list[tuple[str, dict]]:
    return await sync(
        lambda: [(c.name, c.input) for c in ToolCall.objects.filter(session=session).order_by("pk")]
    )()


async def last_answer(session) -> str:
    message = await sync(
        lambda: Message.objects.filter(session=session, kind="assistant").order_by("-seq").first()
    )()
    return "".join(b["text"] for b in message.content if b["type"] == "text")


async def test_what_can_run_next_lists_the_runnable_tickets(demo, chat, member, make_item):
    await sync(make_item)(title="Export bookings as CSV", state="ready")
    await sync(make_item)(title="Design the invoice", state="draft")
    frames, streamed = await turn(chat, member, "What can run next?")
    assert await calls_of(chat) == [("list_runnable", {})]
    assert "BAL-1" in streamed
    assert "Export bookings as CSV" in streamed
    assert "BAL-2" not in streamed
    assert "BAL-1** Export bookings as CSV" in await last_answer(chat)
    assert [f["name"] for f in frames if f["type"] == "tool_result"] == ["list_runnable"]
    assert demo.requests == []  # the model in Anthropic's place was never asked
    records = await sync(lambda: list(UsageRecord.objects.filter(session=chat)))()
    assert {r.model for r in records} == {DEMO_MODEL}
    assert sum(r.input_tokens + r.output_tokens for r in records) == 0
    rows = await sync(usage_rows_priced)(project=chat.project)
    assert [(r["model"], r["estimated_cost"]) for r in rows] == [(DEMO_MODEL, Decimal(0))]


async def test_an_item_key_reads_the_item(demo, chat, member, make_item):
    await sync(make_item)(
        title="Export bookings as CSV",
        state="ready",
        description="The front desk exports a week.",
        acceptance_criteria=["One row per booking"],
    )
    _, streamed = await turn(chat, member, "show me bal-1")
    assert await calls_of(chat) == [("get_item", {"key": "BAL-1"})]
    for shown in (
        "Export bookings as CSV",
        "*ready*",
        "The front desk exports a week.",
        "- One row per booking",
    ):
        assert shown in streamed


async def test_an_unknown_item_is_told_as_the_tool_refused_it(demo, chat, member):
    _, streamed = await turn(chat, member, "Show me BAL-99")
    assert await calls_of(chat) == [("get_item", {"key": "BAL-99"})]
    assert "`get_item` did not work" in streamed


async def test_find_searches_the_plan_and_the_knowledge(demo, chat, member, owner, project, make_item):
    await sync(make_item)(title="Export bookings as CSV", state="ready")
    entry = await sync(knowledge_create)(
        actor=Actor(user=owner),
        kind="decision",
        title="Export format",
        body="CSV, UTF-8.",
        projects=[project],
    )
    _, streamed = await turn(chat, member, "Find export")
    query = {"query": "export", "limit": 5}
    assert await calls_of(chat) == [("search_project", query), ("search_knowledge", query)]
    assert "**BAL-1** Export bookings as CSV" in streamed
    assert f"knowledge:{entry.pk} Export format (decision)" in streamed


async def test_add_a_ticket_proposes_a_changeset_with_its_card(demo, chat, member):
    frames, streamed = await turn(chat, member, "Add a ticket for a CSV export of bookings")
    ((name, proposal),) = await calls_of(chat)
    assert name == "propose_changeset"
    changeset = await sync(Changeset.objects.get)(project=chat.project)
    assert changeset.status == "proposed"
    assert changeset.proposed_by_id == member.pk
    (create,) = changeset.operations
    assert (create["op"], create["kind"], create["fields"]["title"]) == (
        "create",
        "ticket",
        "A CSV export of bookings",
    )
    (card,) = [f for f in frames if f["type"] == "draft"]
    assert card["snapshot"]["number"] == changeset.number
    assert f"changeset #{changeset.number}" in streamed
    assert proposal["operations"] == changeset.operations


async def test_anything_else_says_what_the_demo_can_do(demo, chat, member):
    _, streamed = await turn(chat, member, "Hello there")
    assert await calls_of(chat) == []
    assert "demo planner" in streamed
    assert "not an AI model" in streamed
    assert "what can run next?" in streamed


async def test_the_first_turn_titles_the_chat_from_its_message(demo, chat, member):
    ws = await open_socket(chat, member)
    await ws.send_json_to({"type": "message", "text": "Hello there, what should we plan today"})
    titled = (await frames_until(ws, "title"))[-1]  # proposed after turn_ended
    await ws.disconnect()
    await runner.wait(chat.pk)
    assert titled["title"] == "Hello there, what should we plan"
    assert (await sync(Session.objects.get)(pk=chat.pk)).title == "Hello there, what should we plan"
    title_records = await sync(lambda: list(UsageRecord.objects.filter(session=chat, purpose="title")))()
    assert [r.model for r in title_records] == [DEMO_MODEL]


async def test_a_long_demo_chat_is_compacted_with_a_scripted_summary(demo, chat, member, owner, project):
    await sync(project_update)(actor=Actor(user=owner), project=project, settings={"compact_at_tokens": 50})
    await turn(chat, member, "Hello there")
    await turn(chat, member, "What can run next?")
    compacted = await sync(lambda: list(Event.objects.filter(session=chat, kind="planner.compacted")))()
    assert len(compacted) == 1
    summary = (await sync(Session.objects.get)(pk=chat.pk)).summary
    assert "The demo planner (scripted) was asked, in order:\n\n- Hello there" in summary


async def test_the_demo_answers_whatever_the_daily_token_budget(demo, chat, member, owner, project):
    await sync(project_update)(actor=Actor(user=owner), project=project, settings={"daily_token_budget": 1})
    await sync(UsageRecord.objects.create)(
        project=project, session=chat, purpose="turn", model="claude-sonnet-5-5", input_tokens=10
    )
    _, streamed = await turn(chat, member, "Hello")
    assert "demo planner" in streamed


async def test_a_project_with_a_credential_is_answered_by_the_model(demo, session, member):
    demo.add(say("The model speaks."))
    _, streamed = await turn(session, member, "Hello")
    assert streamed == "The model speaks."
    assert [r.provider for r in demo.turn_requests] == ["anthropic"]


async def test_the_demo_streams_an_answer_in_several_deltas_and_meters_it_at_zero():
    request = ModelRequest(
        model=DEMO_MODEL,
        system="",
        messages=(ChatMessage(role="user", content=(TextBlock("hi"),), kind="human", seq=1),),
        max_tokens=100,
        provider="demo",
    )
    streamed: list[str] = []
    records: list[CallRecord] = []

    class Sink:
        async def on_text(self, delta: str) -> None:
            streamed.append(delta)

        async def on_reset(self) -> None:
            raise AssertionError("the demo never retries")

    async def meter(record: CallRecord) -> None:
        records.append(record)

    response = await DemoGateway(pause=0).complete(request, api_key=None, sink=Sink(), meter=meter)
    assert len(streamed) > 3
    assert "".join(streamed) == response.text
    assert (response.stop_reason, response.model) == ("end_turn", DEMO_MODEL)
    ((record),) = records
    assert (record.model, record.outcome, record.usage.context_tokens) == (DEMO_MODEL, "ok", 0)
    assert deltas("") == []


def test_the_scripts_recognise_plain_requests():
    def calls(text: str) -> list[tuple[str, dict]]:
        return [(name, arguments) for name, arguments in script(_turn_request(text)).calls]

    assert calls("What can run next?") == [("list_runnable", {})]
    assert calls("what's runnable") == [("list_runnable", {})]
    assert calls("Show me DEMO-4") == [("get_item", {"key": "DEMO-4"})]
    assert [name for name, _ in calls("search for export formats")] == ["search_project", "search_knowledge"]
    assert calls("find  CSV export?")[0][1]["query"] == "CSV export"
    (proposed,) = calls("Propose a ticket to add dark mode.")
    assert proposed[1]["operations"][0]["fields"]["title"] == "Add dark mode"
    assert calls("add a ticket") == []  # asks what for
    assert calls("find") == []
    assert calls("Thanks!") == []


def _turn_request(text: str) -> ModelRequest:
    return ModelRequest(
        model=DEMO_MODEL,
        system="",
        messages=(ChatMessage(role="user", content=(TextBlock(text),), kind="human", seq=1),),
        max_tokens=100,
        provider="demo",
    )


def test_the_provider_is_automatic_explicit_or_per_project(project, owner, settings):
    def provider() -> str:
        return project_provider(Project.objects.get(pk=project.pk))

    settings.SERVER = dataclasses.replace(settings.SERVER, anthropic_api_key=None)
    assert provider() == "demo"  # no credential anywhere
    settings.SERVER = dataclasses.replace(settings.SERVER, anthropic_api_key="sk-ant-server")
    assert provider() == "anthropic"
    settings.BALLET_PLANNER = dataclasses.replace(settings.BALLET_PLANNER, provider="demo")
    assert provider() == "demo"  # the server's setting wins over a credential
    project_update(actor=Actor(user=owner), project=project, settings={"provider": "anthropic"})
    assert provider() == "anthropic"  # the project's own wins over the server's
    settings.BALLET_PLANNER = dataclasses.replace(settings.BALLET_PLANNER, provider=None)
    settings.SERVER = dataclasses.replace(settings.SERVER, anthropic_api_key=None)
    project_update(actor=Actor(user=owner), project=project, settings={}, credential="sk-ant-own")
    assert provider() == "anthropic"  # the project's own credential


def test_anthropic_without_a_credential_fails_turns_pointing_to_the_settings_page(project, owner, settings):
    settings.SERVER = dataclasses.replace(settings.SERVER, anthropic_api_key=None)
    project_update(actor=Actor(user=owner), project=project, settings={"provider": "anthropic"})
    session = session_create(user=owner, project=project)
    setup = turn_setup(session=session, history=_empty_history())
    assert setup.settings.provider == "anthropic"
    assert "/projects/BAL/settings/" in (setup.settings.credential_error or "")
    project_update(actor=Actor(user=owner), project=project, settings={"provider": "demo"})
    setup = turn_setup(session=Session.objects.get(pk=session.pk), history=_empty_history())
    assert (setup.settings.provider, setup.settings.model, setup.settings.credential_error) == (
        "demo",
        DEMO_MODEL,
        None,
    )


def _empty_history() -> History:
    return History(messages=[])


async def test_an_agents_question_is_escalated_and_the_humans_answer_reaches_the_agent(
    demo, project, member, maintainer
):
    asker = await client_for(member)
    created = await asker.post(QUESTIONS, {"text": "Should the export include cancelled bookings?"})
    assert created.status_code == 201, created.content
    asked = created.json()
    sub = uuid.UUID(asked["session"])
    await runner.wait(sub)
    # ask_human never runs: it is the request the turn paused on.
    assert [name for name, _ in await calls_of_session(sub)] == ["search_project", "search_knowledge"]
    pending = await sync(HumanRequest.objects.get)(session_id=sub)
    assert "member asks: Should the export include cancelled bookings?" in pending.question

    waiting = asyncio.ensure_future(asker.get(f"{QUESTIONS}{asked['id']}/?wait=10"))
    await waiters(asked["id"])
    colleague = await client_for(maintainer)
    answered = await colleague.post(
        f"/api/v1/planner/sessions/{sub}/answers/", {"request": str(pending.pk), "text": "Leave them out."}
    )
    assert answered.status_code == 200, answered.content
    body = (await waiting).json()
    await runner.wait(sub)
    assert (body["status"], body["answer"], body["answered_by"], body["answered_via"]) == (
        "answered",
        "Leave them out.",
        "user:maintainer",  # on whose reply
        f"planner:{sub}",  # in the planner's words
    )
    assert (await calls_of_session(sub))[2:] == [("answer_question", {"answer": "Leave them out."})]
    assert demo.requests == []


async def calls_of_session(session_id: uuid.UUID) -> list[tuple[str, dict]]:
    return await sync(
        lambda: [(c.name, c.input) for c in ToolCall.objects.filter(session_id=session_id).order_by("pk")]
    )()


async def test_the_seeded_question_answered_in_the_browser_reaches_the_agent(demo):
    """``make run``'s path with no key: the seed's question waits on ask_human; the owner's answer
    resumes its sub-chat on the demo planner, which passes the answer on."""
    await sync(lambda: call_command("seed_demo", "--password", "pw", stdout=StringIO()))()
    question = await sync(Question.objects.select_related("session", "asker").get)(project__key="DEMO")
    pending = await sync(HumanRequest.objects.get)(session=question.session, status="pending")
    owner = await sync(User.objects.get)(username="demo")
    answered = await (await client_for(owner)).post(
        f"/api/v1/planner/sessions/{question.session.pk}/answers/",
        {"request": str(pending.pk), "text": "Include them, marked as cancelled"},
    )
    assert answered.status_code == 200, answered.content
    await runner.wait(question.session.pk)
    refreshed = await sync(Question.objects.get)(pk=question.pk)
    assert (refreshed.status, refreshed.answer) == ("answered", "Include them, marked as cancelled")
    result = await sync(lambda: ToolCall.objects.get(session=question.session, name="answer_question"))()
    assert result.output["status"] == "answered"
