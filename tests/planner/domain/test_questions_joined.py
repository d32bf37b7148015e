"""Questions in flight are joined (docs/domain.md#agents-questions): a question meaning the same as
an unsettled one about the same item opens no sub-chat, calls no model and asks no human; it is
settled with that one. Withdrawing one withdraws no other; ``fresh`` asks anyway."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from planner.domain.services.agent_questions import question_list
from planner.domain.services.sessions import session_create
from planner.live.runner import runner
from planner.models import HumanRequest, Question, Session
from planner.web.serializers import QuestionSerializer
from tests.fakes.scripted import Hang, call, say
from tests.planner.api_client import client_for
from tests.planner.conftest import sync
from tests.planner.web.test_questions import QUESTIONS, ask, waiters

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "Which format does the export write?"


async def asked_of_a_human(scripted, client, ticket) -> dict:
    """The first question about ``ticket``, its sub-chat paused on a request to the humans."""
    scripted.add(call("ask_human", {"question": "CSV or JSON?"}))
    first = await ask(client, TEXT, item=ticket.key)
    await runner.wait(uuid.UUID(first["session"]))
    return first


def sub_chat_state(session_id: str) -> tuple[str, str]:
    """The sub-chat's state and its one request's status."""
    return Session.objects.get(pk=session_id).state, HumanRequest.objects.get(session_id=session_id).status


async def pending_request(session_id: str) -> int:
    return await sync(lambda: HumanRequest.objects.get(session_id=session_id, status="pending").pk)()


async def test_ten_identical_questions_wait_with_the_first_and_hear_the_humans_answer(
    scripted, chat_project, member, owner, maintainer, make_item
):
    ticket = await sync(make_item)(title="Export the plan")
    asker = await client_for(member)
    first = await asked_of_a_human(scripted, asker, ticket)
    calls_before = len(scripted.requests)
    others = [await client_for(user) for user in (owner, maintainer)]

    joined = [await ask(others[n % 2], TEXT, item=ticket.key) for n in range(10)]
    waits = [asyncio.ensure_future(others[0].get(f"{QUESTIONS}{q['id']}/?wait=20")) for q in joined[:3]]
    for question in joined[:3]:
        await waiters(question["id"])
    scripted.add(call("answer_question", {"answer": "CSV, one row a ticket."}), say("Done."))
    request = await pending_request(first["session"])
    answered = await (await client_for(maintainer)).post(
        f"/api/v1/planner/sessions/{first['session']}/answers/", {"request": request, "text": "CSV"}
    )
    heard = [(await wait).json() for wait in waits]
    await runner.wait(uuid.UUID(first["session"]))
    settled = await sync(lambda: list(Question.objects.order_by("pk").values_list("status", "answer")))()

    assert {(q["status"], q["joined_to"], q["session"], q["item"]) for q in joined} == {
        ("open", first["id"], first["session"], ticket.key)
    }
    assert await sync(Session.objects.count)() == 1  # no sub-chat but the first's
    assert len(scripted.requests) - calls_before == 2  # the first's turn, resumed by the answer
    assert await sync(HumanRequest.objects.count)() == 1  # no request to the humans but the first's
    assert answered.status_code == 200, answered.content
    assert [(h["status"], h["answer"]) for h in heard] == [("answered", "CSV, one row a ticket.")] * 3
    assert settled == [("answered", "CSV, one row a ticket.")] * 11


async def test_identical_questions_asked_at_once_open_one_sub_chat(scripted, chat_project, member, owner):
    hang = Hang("Looking", then=call("answer_question", {"answer": "Nightly."}))
    scripted.add(hang, say("Done."))
    clients = [await client_for(user) for user in (member, owner)]

    asked = await asyncio.gather(*(ask(clients[n % 2], "When does the backup run?") for n in range(6)))
    hang.release.set()
    opened = [q for q in asked if q["joined_to"] is None]
    await runner.wait(uuid.UUID(opened[0]["session"]))
    settled = await sync(lambda: set(Question.objects.values_list("status", "answer")))()

    assert len(opened) == 1
    assert {q["joined_to"] for q in asked} == {None, opened[0]["id"]}
    assert await sync(Session.objects.count)() == 1
    assert settled == {("answered", "Nightly.")}


async def test_withdrawing_one_withdraws_no_other(scripted, chat_project, member, owner, make_item):
    """A joined question withdrawn leaves the rest waiting; the first withdrawn leaves its sub-chat
    running for those joined to it; the last withdrawn stops it."""
    ticket = await sync(make_item)(title="Export the plan")
    mine, theirs = await client_for(member), await client_for(owner)
    first = await asked_of_a_human(scripted, mine, ticket)
    second = await ask(theirs, TEXT, item=ticket.key)
    third = await ask(theirs, TEXT, item=ticket.key)

    gone = (await theirs.post(f"{QUESTIONS}{second['id']}/withdraw/")).json()
    first_gone = (await mine.post(f"{QUESTIONS}{first['id']}/withdraw/")).json()
    still = await sync(
        lambda: (Session.objects.get(pk=first["session"]).state, HumanRequest.objects.get().status)
    )()
    last_gone = (await theirs.post(f"{QUESTIONS}{third['id']}/withdraw/")).json()
    stopped = await sync(
        lambda: (Session.objects.get(pk=first["session"]).state, HumanRequest.objects.get().status)
    )()

    assert (gone["status"], gone["joined_to"]) == ("withdrawn", first["id"])
    assert first_gone["status"] == "withdrawn"
    assert still == ("paused", "pending")  # the third still waits on it
    assert last_gone["status"] == "withdrawn"
    assert stopped == ("idle", "cancelled")


async def test_a_question_joined_to_a_withdrawn_one_is_answered_by_its_sub_chat(
    scripted, chat_project, member, owner, maintainer, make_item
):
    ticket = await sync(make_item)(title="Export the plan")
    mine, theirs = await client_for(member), await client_for(owner)
    first = await asked_of_a_human(scripted, mine, ticket)
    joined = await ask(theirs, TEXT, item=ticket.key)
    await mine.post(f"{QUESTIONS}{first['id']}/withdraw/")
    scripted.add(call("answer_question", {"answer": "CSV."}), say("Done."))

    request = await pending_request(first["session"])
    await (await client_for(maintainer)).post(
        f"/api/v1/planner/sessions/{first['session']}/answers/", {"request": request, "text": "CSV"}
    )
    await runner.wait(uuid.UUID(first["session"]))
    read = (await theirs.get(f"{QUESTIONS}{joined['id']}/")).json()
    withdrawn = (await mine.get(f"{QUESTIONS}{first['id']}/")).json()

    assert (read["status"], read["answer"]) == ("answered", "CSV.")
    assert withdrawn["status"] == "withdrawn"


async def test_questions_joined_wait_for_the_humans_with_the_first_and_one_answer_settles_all(
    scripted, chat_project, member, owner, maintainer, make_item
):
    """The first's sub-chat ends without an answer: every joined question needs a human too, with
    its reason; a human's answer to any of them answers them all."""
    ticket = await sync(make_item)(title="Export the plan")
    mine, theirs = await client_for(member), await client_for(owner)
    hang = Hang("Looking", then=say("I cannot tell from the plan."))
    scripted.add(hang)
    first = await ask(mine, TEXT, item=ticket.key)
    await hang.started.wait()
    joined = await ask(theirs, TEXT, item=ticket.key)
    hang.release.set()
    await runner.wait(uuid.UUID(first["session"]))
    waiting = (await theirs.get(f"{QUESTIONS}{joined['id']}/")).json()

    answered = await (await client_for(maintainer)).post(
        f"{QUESTIONS}{joined['id']}/answer/", {"answer": "CSV, one row a ticket."}
    )
    settled = await sync(lambda: list(Question.objects.order_by("pk").values_list("status", "answer")))()

    assert (waiting["status"], waiting["joined_to"]) == ("needs_human", first["id"])
    assert waiting["reason"]
    assert answered.status_code == 200, answered.content
    assert settled == [("answered", "CSV, one row a ticket.")] * 2


async def test_fresh_asks_anyway_and_other_questions_are_not_joined(
    scripted, chat_project, member, owner, make_item
):
    ticket = await sync(make_item)(title="Export the plan")
    other_ticket = await sync(make_item)(title="Import the plan")
    mine, theirs = await client_for(member), await client_for(owner)
    first = await asked_of_a_human(scripted, mine, ticket)
    scripted.add(call("ask_human", {"question": "Which?"}), call("ask_human", {"question": "Which?"}))
    scripted.add(call("ask_human", {"question": "Which?"}))

    fresh = await ask(theirs, TEXT, item=ticket.key, fresh=True)
    elsewhere = await ask(theirs, TEXT, item=other_ticket.key)
    unlike = await ask(theirs, "Who reviews the release notes before they go out?", item=ticket.key)
    for question in (fresh, elsewhere, unlike):
        await runner.wait(uuid.UUID(question["session"]))

    assert [q["joined_to"] for q in (fresh, elsewhere, unlike)] == [None, None, None]
    assert len({first["session"], fresh["session"], elsewhere["session"], unlike["session"]}) == 4


def test_a_list_reads_the_sub_chat_of_joined_questions_with_them(chat_project, member, owner):
    """A joined question's session is its first's sub-chat, read in the list's own statement:
    serializing ten joined questions costs no query more than serializing one."""
    first = Question.objects.create(project=chat_project, asker=member, text=TEXT, started=True)
    sub_chat = session_create(user=member, project=chat_project, title="Which format?")
    Session.objects.filter(pk=sub_chat.pk).update(question=first)

    def listed(joined: int) -> tuple[int, set[str | None]]:
        for _ in range(joined):
            Question.objects.create(project=chat_project, asker=owner, text=TEXT, joined_to=first)
        with CaptureQueriesContext(connection) as queries:
            rows = [QuestionSerializer(q).data for q in question_list(user=owner, project=chat_project)]
        return len(queries), {row["session"] for row in rows}

    one, sessions_one = listed(1)
    eleven, sessions_eleven = listed(9)

    assert eleven == one
    assert sessions_one == sessions_eleven == {str(sub_chat.pk)}
