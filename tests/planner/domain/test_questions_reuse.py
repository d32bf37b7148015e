"""Answers are remembered (docs/domain.md#agents-questions): a human's answer becomes a decision entry,
and a question meaning what an answered one of the same item meant gets its answer at once."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User
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
    """A human's answered question, as stored before answers were remembered (no vector yet)."""
    human = User.objects.filter(username="maintainer").first() or asker
    values = {
        "status": QuestionStatus.ANSWERED,
        "answer": "PostgreSQL 17.",
        "answered_by": f"user:{human.username}",
        "human": human,
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


async def relayed(scripted, asker_client, human_client, reply: str, worded: str, text: str = TEXT) -> dict:
    """A question whose sub-chat asks a human (``ask_human``), who replies ``reply``; then the planner
    answers in its own words, ``worded`` (what whoever steers the sub-chat may have it say)."""
    scripted.add(call("ask_human", {"question": "Postgres or SQLite for sessions?"}))
    asked = await ask(asker_client, text)
    sub = uuid.UUID(asked["session"])
    await runner.wait(sub)
    pending = await sync(lambda: HumanRequest.objects.get(session_id=sub).pk)()
    scripted.add(call("answer_question", {"answer": worded}), say("Done."))
    replied = await human_client.post(
        f"/api/v1/planner/sessions/{sub}/answers/", {"request": str(pending), "text": reply}
    )
    assert replied.status_code == 200, replied.content
    await runner.wait(sub)
    return asked


async def test_the_planners_words_of_a_humans_reply_name_both_and_wait_for_the_human(
    scripted, chat_project, member, maintainer
):
    asked = await relayed(
        scripted,
        await client_for(member),
        await client_for(maintainer),
        "Postgres",
        "Postgres, says maintainer.",
    )

    got = (await (await client_for(member)).get(f"{QUESTIONS}{asked['id']}/")).json()

    assert (got["status"], got["answer"]) == ("answered", "Postgres, says maintainer.")
    assert got["answered_by"] == "user:maintainer"  # the human it stands on
    assert got["answered_via"] == f"planner:{asked['session']}"  # in the planner's words
    assert (got["confirmed"], got["decision"]) == (False, None)  # kept nowhere until confirmed
    assert await sync(KnowledgeEntry.objects.count)() == 0


async def test_an_asker_cannot_launder_her_answer_as_an_owners_decision(
    scripted, chat_project, member, owner
):
    """The finding of issue 43: the owner replies "No" to the sub-chat's ask_human; the asker steers
    her sub-chat to answer "Yes". Before, that "Yes" became a decision authored by the owner and was
    given to every later asker."""
    text = "May we drop the audit log table?"
    asked = await relayed(scripted, await client_for(member), await client_for(owner), "No.", "Yes.", text)
    scripted.add(say("Let me look into it."))  # the later question's own sub-chat

    later = await ask(await client_for(owner), text)

    assert await sync(KnowledgeEntry.objects.filter(author=owner).count)() == 0
    got = (await (await client_for(member)).get(f"{QUESTIONS}{asked['id']}/")).json()
    assert (got["answer"], got["answered_via"], got["confirmed"]) == (
        "Yes.",
        f"planner:{asked['session']}",
        False,
    )
    assert (later["reused"], later["status"]) == (False, "open")  # asked afresh, not answered "Yes."
    inbox = (await (await client_for(owner)).get("/api/v1/inbox/")).json()
    confirm = [e for e in inbox["results"] if e["kind"] == "confirm"]
    assert [(e["id"], e["url"]) for e in confirm] == [
        (f"confirm-{asked['id']}", f"/projects/BAL/chat/{asked['session']}/")
    ]
    assert "from your reply: Yes." in confirm[0]["title"]


async def test_the_human_confirms_the_planners_words_and_only_then_they_are_kept(
    scripted, chat_project, member, maintainer, viewer
):
    human = await client_for(maintainer)
    asked = await relayed(scripted, await client_for(member), human, "Postgres", "Postgres, says maintainer.")
    confirm = f"{QUESTIONS}{asked['id']}/confirm/"

    by_asker = await (await client_for(member)).post(confirm)
    by_viewer = await (await client_for(viewer)).post(confirm)
    confirmed = await human.post(confirm)
    again = await human.post(confirm)

    assert by_asker.status_code == 403, by_asker.content
    assert (
        "Only maintainer, on whose reply the planner answered, confirms its words."
        in by_asker.json()["error"]["message"]
    )
    assert by_viewer.status_code == 403  # no planner.chat
    assert confirmed.status_code == 200, confirmed.content
    assert (confirmed.json()["confirmed"], again.json()) == (True, confirmed.json())
    entry = await sync(decision_of)(asked["id"])
    assert entry is not None
    assert confirmed.json()["decision"] == entry.id
    assert entry.author == "maintainer"
    assert entry.actors == ["user:maintainer"]  # their own act, not the planner's
    assert "The planner asked maintainer:\n\n> Postgres or SQLite for sessions?" in entry.body
    assert "maintainer replied:\n\n> Postgres\n" in entry.body
    assert "in words maintainer confirmed:\n\n> Postgres, says maintainer." in entry.body
    reused = await ask(await client_for(member))
    assert (reused["reused"], reused["answer"]) == (True, "Postgres, says maintainer.")
    assert (reused["answered_by"], reused["answered_via"]) == (
        "user:maintainer",
        f"planner:{asked['session']}",
    )


async def test_an_answer_that_is_no_relay_has_nothing_to_confirm(scripted, chat_project, member, maintainer):
    scripted.add(say("I could not find it."))
    asked = await left_to_humans(await client_for(member))
    await (await client_for(maintainer)).post(
        f"{QUESTIONS}{asked['id']}/answer/", {"answer": "PostgreSQL 17."}
    )

    refused = await (await client_for(maintainer)).post(f"{QUESTIONS}{asked['id']}/confirm/")
    unknown = await (await client_for(maintainer)).post(f"{QUESTIONS}99999/confirm/")

    assert refused.status_code == 409
    assert "waits for confirmation" in refused.json()["error"]["message"]
    assert unknown.status_code == 404


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
