"""Answers are remembered (docs/domain.md#agents-questions): a human's answer becomes a decision entry,
and a question meaning what an answered one of the same item meant gets its answer at once."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from django.utils import timezone

from knowledge.models import KnowledgeEntry
from knowledge.selectors import knowledge_visible
from planner.live.runner import runner
from planner.models import HumanRequest, Question, QuestionStatus, Session
from tests.factories import MembershipFactory, ProjectFactory
from tests.fakes.scripted import call, say
from tests.planner.api_client import client_for
from tests.planner.conftest import sync
from tracker.models import ActivityEvent, Project, Role
from tracker.search.embeddings import embedding_backend

pytestmark = pytest.mark.django_db(transaction=True)

QUESTIONS = "/api/v1/projects/BAL/questions/"
TEXT = "Which database does the login service use?"


async def ask(client, text=TEXT, code=201, **extra):
    response = await client.post(QUESTIONS, {"text": text, **extra})
    assert response.status_code == code, response.content
    return response.json()


async def left_to_humans(client, text=TEXT, **extra):
    """A question whose sub-chat ended without an answer: it waits for the project's humans."""
    asked = await ask(client, text, **extra)
    await runner.wait(uuid.UUID(asked["session"]))
    return asked


def answered(project, asker, text=TEXT, item=None, **fields) -> Question:
    """An answered question, as stored before answers were remembered (no vector yet)."""
    values = {
        "status": QuestionStatus.ANSWERED,
        "answer": "PostgreSQL 17.",
        "answered_by": "user:maintainer",
        "answered_at": timezone.now(),
        "started": True,
        **fields,
    }
    return Question.objects.create(project=project, asker=asker, item=item, text=text, **values)


@dataclass(frozen=True)
class Decision:
    id: int
    kind: str
    title: str
    body: str
    author: str
    projects: list[str]
    items: list[str]
    actors: list[str]  # of its revisions


def decision_of(question_id: int) -> Decision | None:
    question = Question.objects.get(pk=question_id)
    if question.decision_id is None:
        return None
    entry = KnowledgeEntry.objects.select_related("author").get(pk=question.decision_id)
    return Decision(
        id=entry.pk,
        kind=entry.kind,
        title=entry.title,
        body=entry.body,
        author=entry.author.username,
        projects=[p.key for p in entry.projects.all()],
        items=[i.key for i in entry.items.all()],
        actors=list(entry.revisions.values_list("actor", flat=True)),
    )


def events(question_id: int) -> list[str]:
    return list(ActivityEvent.objects.filter(target=f"question:{question_id}").values_list("verb", flat=True))


# ---------------------------------------------------------------------- decisions


async def test_a_humans_answer_becomes_a_decision_on_the_item_attributed_through_the_planner(
    scripted, chat_project, member, maintainer, users, make_item
):
    item = await sync(make_item)(title="Move sessions", state="ready")
    scripted.add(say("I could not find it."))
    asked = await left_to_humans(await client_for(member), item=item.key)

    response = await (await client_for(maintainer)).post(
        f"{QUESTIONS}{asked['id']}/answer/", {"answer": "PostgreSQL 17,\nthe main cluster."}
    )

    assert response.status_code == 200, response.content
    body = response.json()
    entry = await sync(decision_of)(asked["id"])
    assert entry is not None
    assert body["decision"] == entry.id
    assert body["one_off"] is False
    assert (entry.kind, entry.title) == ("decision", f"Answer: {TEXT}")
    assert (entry.projects, entry.items) == (["BAL"], [item.key])
    assert f"Question {asked['id']} about {item.key}, asked by member:" in entry.body
    assert f"> {TEXT}" in entry.body
    assert "> PostgreSQL 17,\n> the main cluster." in entry.body
    assert "Answered by maintainer on " in entry.body
    assert entry.author == "maintainer"
    assert entry.actors == [f"planner:{asked['session']}"]
    created = await sync(ActivityEvent.objects.get)(verb="knowledge.created", target=f"knowledge:{entry.id}")
    assert (created.actor, created.on_behalf_of_id) == (f"planner:{asked['session']}", maintainer.pk)


async def test_the_decision_is_read_by_the_projects_members_only(
    scripted, chat_project, member, maintainer, viewer, users
):
    scripted.add(say("No idea."))
    asked = await left_to_humans(await client_for(member))
    await (await client_for(maintainer)).post(f"{QUESTIONS}{asked['id']}/answer/", {"answer": "PostgreSQL."})

    def readers() -> dict[str, bool]:
        sibling = ProjectFactory(organization=chat_project.organization, key="SIB", name="Sibling")
        MembershipFactory(project=sibling, user=users["stranger"], role=Role.OWNER)
        entry_id = Question.objects.get(pk=asked["id"]).decision_id
        assert entry_id is not None
        return {
            user.username: knowledge_visible(user=user).filter(pk=entry_id).exists()
            for user in (member, viewer, users["stranger"])
        }

    assert await sync(readers)() == {"member": True, "viewer": True, "stranger": False}


async def test_a_one_off_answer_is_not_kept_nor_reused(scripted, chat_project, member, maintainer):
    scripted.add(say("No idea."))
    client = await client_for(member)
    asked = await left_to_humans(client)

    response = await (await client_for(maintainer)).post(
        f"{QUESTIONS}{asked['id']}/answer/", {"answer": "Today, SQLite.", "one_off": True}
    )
    scripted.add(call("answer_question", {"answer": "PostgreSQL."}), say("Done."))
    again = await ask(client)
    await runner.wait(uuid.UUID(again["session"]))

    assert response.status_code == 200, response.content
    assert (response.json()["one_off"], response.json()["decision"]) == (True, None)
    assert await sync(KnowledgeEntry.objects.count)() == 0
    assert (again["reused"], again["status"]) == (False, "open")


@pytest.mark.parametrize("one_off", ["yes", 1, None])
async def test_a_bad_one_off_is_a_400(scripted, chat_project, member, maintainer, one_off):
    scripted.add(say("No idea."))
    asked = await left_to_humans(await client_for(member))

    response = await (await client_for(maintainer)).post(
        f"{QUESTIONS}{asked['id']}/answer/", {"answer": "PostgreSQL.", "one_off": one_off}
    )

    assert response.status_code == 400, response.content
    assert "one_off" in response.json()["error"]["fields"]
    assert (await sync(Question.objects.get)(pk=asked["id"])).status == "needs_human"


async def test_the_planners_own_answer_is_no_decision(scripted, chat_project, member):
    scripted.add(call("answer_question", {"answer": "PostgreSQL 17."}), say("Answered."))
    asked = await ask(await client_for(member))
    await runner.wait(uuid.UUID(asked["session"]))

    question = await sync(Question.objects.get)(pk=asked["id"])

    assert question.status == "answered"
    assert question.decision_id is None
    assert await sync(KnowledgeEntry.objects.count)() == 0
    assert question.embedding_model == embedding_backend().name  # kept for later questions


async def test_the_planner_passing_on_a_humans_answer_keeps_it_as_that_humans_decision(
    scripted, chat_project, member, maintainer
):
    scripted.add(call("ask_human", {"question": "Postgres or SQLite for sessions?"}))
    asked = await ask(await client_for(member))
    sub = uuid.UUID(asked["session"])
    await runner.wait(sub)
    pending = await sync(lambda: HumanRequest.objects.get(session_id=sub).pk)()
    scripted.add(call("answer_question", {"answer": "Postgres, says maintainer."}), say("Done."))

    answered_request = await (await client_for(maintainer)).post(
        f"/api/v1/planner/sessions/{sub}/answers/", {"request": str(pending), "text": "Postgres"}
    )
    await runner.wait(sub)

    assert answered_request.status_code == 200, answered_request.content
    entry = await sync(decision_of)(asked["id"])
    assert entry is not None
    assert entry.author == "maintainer"
    assert entry.actors == [f"planner:{sub}"]
    assert "> Postgres, says maintainer." in entry.body
    assert "after asking maintainer:\n\n> Postgres or SQLite for sessions?" in entry.body
    assert "maintainer replied:\n\n> Postgres" in entry.body
    assert (entry.projects, entry.items) == (["BAL"], [])


# ---------------------------------------------------------------------- reuse


async def test_a_question_meaning_the_same_gets_the_earlier_answer_at_once(
    scripted, chat_project, member, maintainer, make_item
):
    item = await sync(make_item)(title="Move sessions", state="ready")
    scripted.add(say("No idea."))
    client = await client_for(member)
    first = await left_to_humans(client, item=item.key)
    await (await client_for(maintainer)).post(
        f"{QUESTIONS}{first['id']}/answer/", {"answer": "PostgreSQL 17."}
    )
    calls = len(scripted.requests)
    sessions = await sync(Session.objects.count)()

    reused = await ask(client, "which database does the login service use", item=item.key)
    waited = await client.get(f"{QUESTIONS}{reused['id']}/?wait=30")

    first_now = await sync(Question.objects.get)(pk=first["id"])
    assert (reused["status"], reused["answer"], reused["reused"], reused["reused_from"]) == (
        "answered",
        "PostgreSQL 17.",
        True,
        first["id"],
    )
    assert reused["answered_by"] == "user:maintainer"
    assert reused["answered_at"] == first_now.answered_at.isoformat().replace("+00:00", "Z")
    assert (reused["session"], reused["item"], reused["decision"]) == (None, item.key, None)
    assert waited.status_code == 200
    assert waited.json() == reused
    assert len(scripted.requests) == calls  # no model call
    assert await sync(Session.objects.count)() == sessions  # no sub-chat
    assert await sync(events)(reused["id"]) == ["question.reused"]
    event = await sync(ActivityEvent.objects.get)(verb="question.reused")
    assert event.data["reused_from"] == first["id"]
    assert (event.data["item"], event.data["answer"]) == (item.key, "PostgreSQL 17.")
    listed = (await client.get(QUESTIONS)).json()["results"]
    assert [(q["id"], q["reused"]) for q in listed] == [(reused["id"], True), (first["id"], False)]


async def test_fresh_asks_the_planner_anyway(scripted, chat_project, member, owner):
    await sync(answered)(chat_project, owner)
    scripted.add(call("answer_question", {"answer": "PostgreSQL 18 now."}), say("Done."))
    client = await client_for(member)

    asked = await ask(client, fresh=True)
    await runner.wait(uuid.UUID(asked["session"]))

    assert (asked["reused"], asked["status"]) == (False, "open")
    assert asked["session"] is not None
    assert TEXT in scripted.turn_requests[0].messages[0].content[0].text
    refused = await client.post(QUESTIONS, {"text": TEXT, "fresh": "yes"})
    assert refused.status_code == 400
    assert "fresh" in refused.json()["error"]["fields"]


async def test_an_older_answer_without_a_vector_is_embedded_when_compared(
    scripted, chat_project, member, owner
):
    earlier = await sync(answered)(chat_project, owner)
    assert earlier.embedding is None

    asked = await ask(await client_for(member))

    assert asked["reused_from"] == earlier.pk
    stored = await sync(Question.objects.get)(pk=earlier.pk)
    assert stored.embedding_model == embedding_backend().name
    assert len(bytes(stored.embedding)) == 4 * embedding_backend().dimensions


async def test_answers_of_another_item_or_the_project_level_are_not_reused(
    scripted, chat_project, member, owner, make_item
):
    one, other = await sync(lambda: (make_item(title="One"), make_item(title="Other")))()
    await sync(answered)(chat_project, owner, item=one)
    await sync(answered)(chat_project, owner, item=None, answer="Project-wide: PostgreSQL.")
    client = await client_for(member)
    scripted.add(call("answer_question", {"answer": "Redis."}), say("Done."))

    about_other = await ask(client, item=other.key)
    await runner.wait(uuid.UUID(about_other["session"]))
    project_level = await ask(client)
    about_one = await ask(client, item=one.key)

    assert (about_other["reused"], about_other["status"]) == (False, "open")
    assert (project_level["reused"], project_level["answer"]) == (True, "Project-wide: PostgreSQL.")
    assert (about_one["reused"], about_one["answer"], about_one["item"]) == (True, "PostgreSQL 17.", one.key)


async def test_another_projects_answer_is_never_reused(scripted, chat_project, member, owner, other_project):
    await sync(answered)(other_project, owner, answer="The secret answer of OTH.")
    scripted.add(call("answer_question", {"answer": "PostgreSQL."}), say("Done."))

    asked = await ask(await client_for(member))
    await runner.wait(uuid.UUID(asked["session"]))
    read = (await (await client_for(member)).get(f"{QUESTIONS}{asked['id']}/")).json()

    assert (asked["reused"], asked["status"]) == (False, "open")
    assert read["answer"] == "PostgreSQL."
    assert "secret" not in str(
        await sync(lambda: list(ActivityEvent.objects.values_list("data", flat=True)))()
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"status": QuestionStatus.WITHDRAWN, "answer": ""},
        {"status": QuestionStatus.NEEDS_HUMAN, "answer": ""},
        {"status": QuestionStatus.OPEN, "answer": ""},
        {"one_off": True},
    ],
    ids=["withdrawn", "needs_human", "open", "one_off"],
)
async def test_only_kept_answers_are_reused(scripted, chat_project, member, owner, fields):
    await sync(answered)(chat_project, owner, **fields)
    scripted.add(call("answer_question", {"answer": "PostgreSQL."}), say("Done."))

    asked = await ask(await client_for(member))
    await runner.wait(uuid.UUID(asked["session"]))

    assert (asked["reused"], asked["status"]) == (False, "open")


async def test_a_reused_copy_is_not_reused_itself(scripted, chat_project, member, owner):
    earlier = await sync(answered)(chat_project, owner)
    client = await client_for(member)

    copies = [await ask(client) for _ in range(2)]

    assert [c["reused_from"] for c in copies] == [earlier.pk, earlier.pk]


async def test_the_projects_threshold_decides(scripted, chat_project, member, owner):
    reworded = "Which database does the login service use for its sessions?"
    backend = embedding_backend()
    vectors = backend.embed([TEXT, reworded])
    similarity = float(vectors[0] @ vectors[1])
    assert similarity < 0.9  # below the default threshold: not the same by default
    await sync(answered)(chat_project, owner)
    scripted.add(say("No idea."))  # left to the humans: no answer of its own to reuse
    client = await client_for(member)

    by_default = await ask(client, reworded)
    await runner.wait(uuid.UUID(by_default["session"]))
    await sync(Project.objects.filter(pk=chat_project.pk).update)(
        settings={"reuse_threshold": round(similarity - 0.05, 3)}
    )
    lowered = await ask(client, reworded)

    assert by_default["reused"] is False
    assert (lowered["reused"], lowered["answer"]) == (True, "PostgreSQL 17.")


async def test_a_reused_question_replays_with_its_idempotency_key(scripted, chat_project, member, owner):
    earlier = await sync(answered)(chat_project, owner)
    client = await client_for(member)

    first = await ask(client, idempotency_key="k-1")
    again = await ask(client, code=200, idempotency_key="k-1")

    assert first["reused_from"] == earlier.pk
    assert again == first
    assert await sync(Question.objects.count)() == 2
