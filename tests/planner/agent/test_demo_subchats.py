"""The demo planner's replan over sub-chats (SPEC § 13.6, docs/architecture.md#the-demo-planner):
"replan the payments epic" finds the epic, starts two sub-chats with briefs naming it and its
tickets, each sub-chat does its small job without starting one, and the resumed turn collects
both answers. First the scripts alone, on tool outputs shaped as the tools answer; then the whole
of it through the runner, the real tools and sub-chats."""

from __future__ import annotations

import dataclasses
import json
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from knowledge.services import knowledge_create
from planner.agent.demo import DEMO_MODEL, DemoGateway, Scripted, script
from planner.agent.messages import ChatMessage, ModelRequest, TextBlock, ToolResultBlock, ToolUseBlock
from planner.agent.providers import ProviderGateway
from planner.domain.prompt import SUBCHAT_PROMPT
from planner.domain.services.sessions import session_create
from planner.domain.services.subchats import first_message
from planner.live.runner import runner
from planner.models import HumanRequest, Message, Session, ToolCall
from tests.fakes.scripted import ScriptedGateway
from tests.planner.conftest import sync
from tracker.management import demo_content
from tracker.models import Dependency, Item, Project
from tracker.services.activity import Actor

EPICS = [
    {"key": "DEMO-2", "kind": "epic", "title": "Accounts and sign-in", "state": "ready"},
    {"key": "DEMO-3", "kind": "epic", "title": "Court booking", "state": "ready"},
    {"key": "DEMO-5", "kind": "epic", "title": "Payments and notifications", "state": "draft"},
]
PAYMENTS_TICKETS = [
    {
        "key": "DEMO-15",
        "kind": "ticket",
        "title": "Send transactional email through Postmark",
        "state": "ready",
    },
    {"key": "DEMO-16", "kind": "ticket", "title": "Confirmation email after booking", "state": "draft"},
    {
        "key": "DEMO-18",
        "kind": "ticket",
        "title": "Pay the guest fee by card with Stripe Checkout",
        "state": "done",
    },
]
SYSTEM = "You are Ballet's planner."


class History:
    """A chat's messages as the loop keeps them, for the scripts to read."""

    def __init__(self, first: str, *, system: str = SYSTEM) -> None:
        self.system = system
        self.messages: list[ChatMessage] = [self._message("user", (TextBlock(first),), "human")]

    def _message(self, role: Any, content: tuple, kind: str) -> ChatMessage:
        return ChatMessage(role=role, content=content, kind=kind, seq=len(getattr(self, "messages", [])) + 1)

    def request(self) -> ModelRequest:
        return ModelRequest(
            model=DEMO_MODEL,
            system=self.system,
            messages=tuple(self.messages),
            max_tokens=100,
            provider="demo",
        )

    def answer(self) -> Scripted:
        """The demo's next answer, kept in the history with ids for its calls."""
        scripted = script(self.request())
        uses = tuple(
            ToolUseBlock(f"toolu_{len(self.messages)}_{n}", *call) for n, call in enumerate(scripted.calls)
        )
        self.messages.append(self._message("assistant", (TextBlock(scripted.text), *uses), "assistant"))
        return scripted

    def results(self, *outputs: tuple[Any, bool]) -> None:
        """The tools' outputs for the last answer's calls, in order, as JSON (and whether each failed)."""
        uses = self.messages[-1].tool_uses
        assert len(uses) == len(outputs)
        blocks = tuple(
            ToolResultBlock(use.id, json.dumps(output), is_error=failed)
            for use, (output, failed) in zip(uses, outputs, strict=True)
        )
        self.messages.append(self._message("user", blocks, "tool_results"))


def names(scripted: Scripted) -> list[str]:
    return [name for name, _ in scripted.calls]


def epic_detail(key: str = "DEMO-5", title: str = "Payments and notifications", kind: str = "epic") -> dict:
    return {"key": key, "kind": kind, "title": title, "state": "draft", "version": 1, "blocked_by": []}


def started_subchats(asked: str) -> tuple[History, Scripted]:
    """The parent's history up to its two start_subchat calls for ``asked``."""
    chat = History(asked)
    assert names(chat.answer()) == ["list_items"]
    chat.results(({"items": EPICS, "offset": 0, "more": False}, False))
    read = chat.answer()
    assert read.calls == (
        ("get_item", {"key": "DEMO-5"}),
        ("list_items", {"epic": "DEMO-5", "kind": "ticket"}),
    )
    chat.results((epic_detail(), False), ({"items": PAYMENTS_TICKETS, "offset": 0, "more": False}, False))
    return chat, chat.answer()


def test_replan_the_payments_epic_starts_two_subchats_briefed_with_the_epic_and_its_tickets():
    _, split = started_subchats("Replan the payments epic, please")
    assert names(split) == ["start_subchat", "start_subchat"]
    review, knowledge = (arguments for _, arguments in split.calls)
    assert review["title"] == "Replan DEMO-5: tickets and blockers"
    assert knowledge["title"] == "Replan DEMO-5: knowledge and decisions"
    for brief in (review, knowledge):
        assert brief["item"] == "DEMO-5"
        assert "DEMO-5" in brief["brief"]
        assert "Payments and notifications" in brief["brief"]
        for ticket in PAYMENTS_TICKETS:
            assert f"- {ticket['key']} {ticket['title']} ({ticket['state']})" in brief["brief"]
    assert "two sub-chats" in split.text


def test_an_epic_is_found_by_its_key_or_any_word_of_its_title():
    assert script(History("replan demo-5").request()).calls == (
        ("get_item", {"key": "DEMO-5"}),
        ("list_items", {"epic": "DEMO-5", "kind": "ticket"}),
    )
    for asked, key in (("Replan the booking epic", "DEMO-3"), ("could you re-plan accounts?", "DEMO-2")):
        chat = History(asked)
        chat.answer()
        chat.results(({"items": EPICS, "offset": 0, "more": False}, False))
        assert chat.answer().calls[0] == ("get_item", {"key": key})

    unknown = History("replan the invoicing epic")
    unknown.answer()
    unknown.results(({"items": EPICS, "offset": 0, "more": False}, False))
    said = unknown.answer()
    assert said.calls == ()
    assert "which epic" in said.text
    assert all(epic["key"] in said.text for epic in EPICS)

    several = History("replan the booking and accounts epics")
    several.answer()
    several.results(({"items": EPICS, "offset": 0, "more": False}, False))
    said = several.answer()
    assert (said.calls, said.text.startswith("Several epics match")) == ((), True)
    assert "DEMO-5" not in said.text


def test_each_seeded_epic_is_found_by_its_word():
    """``make run``'s plan: "replan the accounts/booking/payments epic" names one epic each."""
    seeded = [
        {"key": f"DEMO-{n}", "kind": "epic", "title": spec.title, "state": spec.states[-1]}
        for n, spec in enumerate(demo_content.EPICS, start=1)
    ]
    for n, spec in enumerate(demo_content.EPICS, start=1):
        chat = History(f"replan the {spec.ref} epic")
        chat.answer()
        chat.results(({"items": seeded, "offset": 0, "more": False}, False))
        assert chat.answer().calls[0] == ("get_item", {"key": f"DEMO-{n}"}), spec.ref


def test_a_ticket_or_an_empty_epic_is_not_split():
    ticket = History("replan DEMO-15")
    ticket.answer()
    ticket.results((epic_detail("DEMO-15", "Send email", kind="ticket"), False), ({"error": {}}, True))
    said = ticket.answer()
    assert (said.calls, "not an epic" in said.text) == ((), True)

    empty = History("replan DEMO-5")
    empty.answer()
    empty.results((epic_detail(), False), ({"items": [], "offset": 0, "more": False}, False))
    said = empty.answer()
    assert (said.calls, "no tickets" in said.text) == ((), True)


def subchat(arguments: dict[str, Any]) -> History:
    """A sub-chat as the runner opens it: its brief as the first message, the sub-chat prompt."""
    return History(first_message(arguments), system=f"{SYSTEM}\n\n{SUBCHAT_PROMPT}")


def test_in_a_subchat_the_demo_does_its_briefs_job_and_answers_without_a_subchat():
    _, split = started_subchats("replan the payments epic")
    review, knowledge = (subchat(arguments) for _, arguments in split.calls)

    reading = review.answer()
    assert reading.calls == tuple(("get_item", {"key": t["key"]}) for t in PAYMENTS_TICKETS)
    blocked = {**epic_detail("DEMO-16", "Confirmation email after booking", kind="ticket"), "state": "ready"}
    blocked["blocked_by"] = [{"key": "DEMO-15", "title": "Send transactional email", "state": "ready"}]
    ready = {
        **epic_detail("DEMO-15", "Send transactional email through Postmark", kind="ticket"),
        "state": "ready",
    }
    done = {**epic_detail("DEMO-18", "Pay the guest fee", kind="ticket"), "state": "done"}
    review.results((ready, False), (blocked, False), (done, False))
    reviewed = review.answer()
    assert reviewed.calls == ()
    assert "**DEMO-15** Send transactional email through Postmark: *ready*, can run now" in reviewed.text
    assert "**DEMO-16** Confirmation email after booking: *ready*, waits on DEMO-15 (ready)" in reviewed.text
    assert "1 can run now, 1 waits on blockers." in reviewed.text

    searching = knowledge.answer()
    assert searching.calls == (("search_knowledge", {"query": "Payments and notifications", "limit": 5}),)
    hit = {
        "id": 7,
        "kind": "decision",
        "title": "Card payments go through Stripe",
        "snippet": "",
        "score": 1.0,
    }
    knowledge.results(({"results": [hit]}, False))
    found = knowledge.answer()
    assert found.calls == ()
    assert "knowledge:7 Card payments go through Stripe (decision)" in found.text

    # A human asking a sub-chat for a replan is told it starts none (the tool refuses it anyway).
    review.messages.append(review._message("user", (TextBlock("Now replan the booking epic"),), "human"))
    refused = review.answer()
    assert "start_subchat" not in names(refused)
    assert "starts no sub-chats" in refused.text


def test_the_resumed_turn_collects_both_subchats_answers_under_their_titles():
    chat, split = started_subchats("replan the payments epic")
    titles = [arguments["title"] for _, arguments in split.calls]
    chat.results(
        (
            {
                "session": "a",
                "title": titles[0],
                "outcome": "completed",
                "answer": "- **DEMO-15** can run now\n\n1 can run now.",
                "changesets": [],
            },
            False,
        ),
        (
            {
                "session": "b",
                "title": titles[1],
                "outcome": "completed",
                "answer": "Stripe.",
                "changesets": [4],
            },
            False,
        ),
    )
    collected = chat.answer()
    assert collected.calls == ()
    assert collected.text.startswith("Both sub-chats have answered.")
    assert f"**{titles[0]}** answered:\n\n> - **DEMO-15** can run now\n>\n> 1 can run now." in collected.text
    assert f"**{titles[1]}** answered:\n\n> Stripe." in collected.text
    assert "changeset #4" in collected.text


def test_a_failed_subchat_is_said_in_the_collected_answer():
    chat, _ = started_subchats("replan the payments epic")
    chat.results(
        (
            {"session": "a", "title": "Part A", "outcome": "completed", "answer": "Fine.", "changesets": []},
            False,
        ),
        (
            {
                "session": "b",
                "title": "Part B",
                "outcome": "failed",
                "answer": "",
                "changesets": [],
                "error": {"code": "subchat_failed", "message": "The sub-chat failed: no model"},
            },
            True,
        ),
    )
    collected = chat.answer()
    assert collected.text.startswith("1 of 2 sub-chats answered.")
    assert "**Part B** did not finish: The sub-chat failed: no model" in collected.text


# Through the runner: the real tools, sub-chats and pauses, on the demo planner.


@pytest.fixture
def demo_runner(settings):
    """No key anywhere: the process's runner answers every chat with the demo planner."""
    settings.SERVER = dataclasses.replace(settings.SERVER, anthropic_api_key=None)
    previous = runner._gateway
    runner.gateway = ProviderGateway(anthropic=ScriptedGateway(), demo=DemoGateway(pause=0))
    yield runner
    runner.gateway = previous


def payments_plan(project, owner, make_item) -> dict[str, Any]:
    epic = make_item(kind="epic", title="Payments and notifications")
    make_item(kind="epic", title="Court booking")
    email = make_item(title="Send transactional email through Postmark", state="ready", epic=epic)
    confirm = make_item(title="Confirmation email after booking", state="ready", epic=epic)
    Dependency.objects.create(blocker=email, blocked=confirm)
    entry = knowledge_create(
        actor=Actor(user=owner),
        kind="decision",
        title="Payments and notifications: card fees through Stripe Checkout",
        body="Guests pay by card; no cash.",
        projects=[project],
    )
    return {"epic": epic.key, "tickets": [email.key, confirm.key], "entry": entry.title}


def answer_of(session_id) -> str:
    message = Message.objects.filter(session_id=session_id, kind="assistant").order_by("-seq").first()
    assert message is not None
    return "".join(block["text"] for block in message.content if block["type"] == "text")


async def replan(chat, user, text: str) -> list[Session]:
    """Send ``text``; wait for the turn, the two sub-chats it started, and the turn they resume."""
    await runner.send(session_id=chat.pk, user=user, text=text)
    await runner.wait(chat.pk)
    children = await sync(lambda: list(Session.objects.filter(parent=chat).order_by("created_at")))()
    assert len(children) == 2
    for child in children:
        await runner.wait(child.pk)
    await runner.wait(chat.pk)
    await runner.settle()
    return children


@pytest.mark.django_db(transaction=True)
async def test_through_the_runner_the_parent_answers_with_both_subchats_answers(
    demo_runner, project, owner, member, make_item
):
    plan = await sync(payments_plan)(project, owner, make_item)
    chat = await sync(session_create)(user=member, project=project)

    children = await replan(chat, member, "Replan the payments epic")

    parent = await sync(Session.objects.get)(pk=chat.pk)
    assert parent.state == "idle"
    answer = await sync(answer_of)(chat.pk)
    assert answer.startswith("Both sub-chats have answered."), answer
    for child in children:
        child_answer = await sync(answer_of)(child.pk)
        assert child.title in answer
        first_line = child_answer.splitlines()[0]
        assert f"> {first_line}" in answer
        calls = await sync(
            lambda c=child: list(ToolCall.objects.filter(session=c).values_list("name", flat=True))
        )()
        assert "start_subchat" not in calls
    review, knowledge = children
    assert review.title == f"Replan {plan['epic']}: tickets and blockers"
    reviewed = await sync(answer_of)(review.pk)
    first, _ = plan["tickets"]
    assert f"**{first}** Send transactional email through Postmark: *ready*, can run now" in reviewed
    assert f"waits on {first} (ready)" in reviewed
    assert plan["entry"] in await sync(answer_of)(knowledge.pk)
    assert plan["entry"] in answer
    parent_calls = await sync(
        lambda: list(ToolCall.objects.filter(session=chat).order_by("pk").values_list("name", flat=True))
    )()
    assert parent_calls == ["list_items", "get_item", "list_items"]  # start_subchat waits as a request
    requests = await sync(
        lambda: list(
            HumanRequest.objects.filter(session=chat).values_list("kind", "status", "input__session")
        )
    )()
    assert sorted(requests) == sorted(("subchat", "answered", str(child.pk)) for child in children)


@pytest.mark.django_db(transaction=True)
async def test_the_seeded_booking_epic_is_replanned_over_two_subchats(demo_runner):
    """``make run``'s path with no key: the seeded plan's booking epic, by its word."""
    await sync(lambda: call_command("seed_demo", "--password", "pw", stdout=StringIO()))()
    owner = await sync(User.objects.get)(username="demo")
    demo = await sync(Project.objects.get)(key="DEMO")
    chat = await sync(session_create)(user=owner, project=demo)
    epic = await sync(Item.objects.get)(project=demo, kind="epic", title="Court booking")
    tickets = await sync(lambda: sorted(Item.objects.filter(epic=epic).values_list("number", flat=True)))()
    key = f"DEMO-{epic.number}"

    children = await replan(chat, owner, "replan the booking epic")

    answer = await sync(answer_of)(chat.pk)
    assert answer.startswith("Both sub-chats have answered."), answer
    assert [child.title for child in children] == [
        f"Replan {key}: tickets and blockers",
        f"Replan {key}: knowledge and decisions",
    ]
    reviewed = await sync(answer_of)(children[0].pk)
    assert all(f"**DEMO-{number}**" in reviewed for number in tickets)
    assert "Booking rules of the Riverside Tennis Club" in answer  # the club's rules, found
