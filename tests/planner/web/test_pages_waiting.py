"""The pages' side of docs/domain.md: chats waiting for the reader, question sub-chats, who may write."""

from __future__ import annotations

import re

import pytest
from pytest_django.asserts import assertContains, assertNotContains

from planner.domain.selectors import session_list
from planner.domain.services.sessions import session_create
from planner.domain.transcripts import session_about
from planner.models import HumanRequest, Question, RequestKind, RequestStatus, Session
from tests.factories import MembershipFactory, UserFactory
from tests.planner.conftest import chat_url

WAITING_BADGE = '<span class="badge waiting">waiting for you</span>'


def sessions_waiting(*, user, project) -> list[Session]:
    return [
        session for session in session_list(user=user, project=project) if getattr(session, "waiting", None)
    ]


def pending(session: Session, kind: str = RequestKind.QUESTION) -> HumanRequest:
    return HumanRequest.objects.create(
        session=session,
        turn=1,
        tool_use_id=f"toolu_{HumanRequest.objects.count()}",
        kind=kind,
        question="Replica or primary?" if kind == RequestKind.QUESTION else "",
        tool="" if kind == RequestKind.QUESTION else "propose_changeset",
    )


@pytest.fixture
def agent(project):
    user = UserFactory(username="agent")
    MembershipFactory(project=project, user=user, role="member")
    return user


@pytest.fixture
def sub_chat(chat_project, agent, make_item):
    """An agent's question about an item, and its sub-chat, owned by the agent."""
    item = make_item(title="Export bookings")
    question = Question.objects.create(
        project=chat_project, asker=agent, item=item, text="Which <b>database</b>?", started=True
    )
    session = session_create(user=agent, project=chat_project, title="Which database?")
    session.question = question
    session.save(update_fields=["question"])
    return session


def test_a_chat_waiting_for_its_owner_comes_first_and_is_marked(signed_in, session, member, chat_project):
    waiting_chat = session
    waiting_chat.title = "Waits for an answer"
    waiting_chat.save(update_fields=["title"])
    pending(waiting_chat)
    newer = session_create(user=member, project=chat_project, title="A newer chat")
    answered = session_create(user=member, project=chat_project, title="Answered already")
    HumanRequest.objects.filter(pk=pending(answered).pk).update(status=RequestStatus.ANSWERED)

    response = signed_in(member).get("/projects/BAL/chat/")
    sessions = list(response.context["sessions"])
    assert sessions[0] == waiting_chat
    assert set(sessions[1:]) == {newer, answered}
    assertContains(response, WAITING_BADGE, count=1, html=True)
    assertContains(response, "1 chat waiting for you")


def test_an_approval_waits_for_the_chats_owner_only(session, member, maintainer, chat_project):
    pending(session, RequestKind.APPROVAL)
    assert sessions_waiting(user=member, project=chat_project) == [session]
    assert sessions_waiting(user=maintainer, project=chat_project) == []


def test_a_question_sub_chat_waits_for_every_member_who_may_chat(sub_chat, users, agent, chat_project):
    pending(sub_chat)
    for name in ("member", "maintainer", "owner"):
        assert sessions_waiting(user=users[name], project=chat_project) == [sub_chat], name
    assert sessions_waiting(user=agent, project=chat_project) == [sub_chat]
    assert sessions_waiting(user=users["viewer"], project=chat_project) == []
    assert sessions_waiting(user=users["stranger"], project=chat_project) == []


def test_a_changeset_in_a_question_sub_chat_waits_for_those_who_apply_not_the_asker(
    sub_chat, users, agent, chat_project
):
    pending(sub_chat, RequestKind.APPROVAL)  # propose_changeset
    for name in ("maintainer", "owner"):
        assert sessions_waiting(user=users[name], project=chat_project) == [sub_chat], name
    for user in (users["member"], users["viewer"], agent):
        assert sessions_waiting(user=user, project=chat_project) == [], user


def test_the_chat_list_names_a_sub_chats_asker_and_item(signed_in, sub_chat, maintainer):
    pending(sub_chat)
    response = signed_in(maintainer).get("/projects/BAL/chat/")
    item = sub_chat.question.item
    assertContains(response, f"Question from agent about {item.key}")
    assertContains(response, WAITING_BADGE, count=1, html=True)
    assertContains(response, f'href="{chat_url(sub_chat)}"')


def test_the_home_page_counts_the_chats_waiting_for_the_user(signed_in, session, member, sub_chat):
    client = signed_in(member)
    assertNotContains(client.get("/"), "waiting for you")
    pending(session)
    pending(sub_chat)
    response = client.get("/")
    assertContains(response, '<a href="/projects/BAL/chat/">2 chats waiting for you', html=False)


def test_the_home_page_shows_no_count_to_a_viewer(signed_in, viewer, sub_chat):
    pending(sub_chat)
    assertNotContains(signed_in(viewer).get("/"), "waiting for you")


def test_a_sub_chat_shows_its_question_to_its_asker_escaped(signed_in, sub_chat, agent):
    response = signed_in(agent).get(chat_url(sub_chat))
    assertContains(response, 'class="question-banner"')
    assertContains(response, "Question from agent about")
    assertContains(response, sub_chat.question.item.key)
    assertContains(response, "Which &lt;b&gt;database&lt;/b&gt;?")
    assertContains(response, f'data-question="{sub_chat.question.pk}"')
    assertContains(response, 'data-can-send="true"')
    assertContains(response, 'id="composer"')


def test_an_ordinary_chat_has_no_question_banner(signed_in, session, member):
    response = signed_in(member).get(chat_url(session))
    assertNotContains(response, "question-banner")
    assertContains(response, 'data-question=""')
    assertContains(response, 'data-can-send="true"')


def test_a_superuser_reads_someone_elses_chat_without_a_composer(signed_in, session):
    admin = UserFactory(username="root", is_superuser=True, is_staff=True)
    response = signed_in(admin).get(chat_url(session))
    assert response.status_code == 200
    assertContains(response, 'data-can-send="false"')
    assertNotContains(response, 'id="composer"')
    assertContains(response, "This is member's chat: you can read it but not write in it.")


def test_an_answered_sub_chat_shows_the_answer_and_who_gave_it(signed_in, sub_chat, agent):
    question = sub_chat.question
    Question.objects.filter(pk=question.pk).update(
        status="answered", answer="Use the <i>replica</i>.", answered_by=f"planner:{sub_chat.pk}"
    )
    response = signed_in(agent).get(chat_url(sub_chat))
    assertContains(response, "Answer by the planner: </span>Use the &lt;i&gt;replica&lt;/i&gt;.", html=False)
    assertContains(response, '<span id="question-status" class="badge question-answered">Answered</span>')
    Question.objects.filter(pk=question.pk).update(answered_by="user:maintainer")
    assertContains(signed_in(agent).get(chat_url(sub_chat)), "Answer by maintainer: </span>")


def test_a_sub_chat_says_how_many_questions_joined_it(signed_in, sub_chat, agent, member):
    """Questions meaning the same, asked while it was unsettled, get its answer: the page and the
    API say how many (not those withdrawn since)."""
    question = sub_chat.question
    client = signed_in(agent)
    alone = client.get(chat_url(sub_chat))
    for status in ("open", "open", "withdrawn"):
        Question.objects.create(
            project=question.project,
            asker=member,
            item=question.item,
            text=question.text,
            status=status,
            joined_to=question,
        )

    response = client.get(chat_url(sub_chat))
    about = session_about(session=sub_chat)  # the session API's ``about``

    assertNotContains(alone, "question-joined")
    assertContains(
        response, "2 more questions meaning the same joined this one: their askers get this answer."
    )
    assert about is not None
    assert about["joined"] == 2


def needs_human(session: Session) -> Question:
    question = session.question
    assert question is not None
    question.status, question.reason = "needs_human", "The planner ended its turn without answering."
    question.save(update_fields=["status", "reason"])
    return question


@pytest.mark.django_db
def test_a_question_left_to_the_humans_waits_for_every_member_who_may_chat(
    sub_chat, maintainer, member, viewer, signed_in
):
    needs_human(sub_chat)

    page = signed_in(maintainer).get(chat_url(sub_chat))

    assertContains(page, "The planner could not answer: The planner ended its turn without answering.")
    assertContains(page, 'name="answer"')
    assert [s.pk for s in sessions_waiting(user=member, project=sub_chat.project)] == [sub_chat.pk]
    assert sessions_waiting(user=viewer, project=sub_chat.project) == []


@pytest.mark.django_db
def test_a_member_answers_a_question_left_to_the_humans_from_its_sub_chat(sub_chat, maintainer, signed_in):
    question = needs_human(sub_chat)
    browser = signed_in(maintainer)

    empty = browser.post(chat_url(sub_chat) + "answer/", {"answer": "  "})
    answered = browser.post(chat_url(sub_chat) + "answer/", {"answer": "PostgreSQL 17."})
    again = browser.post(chat_url(sub_chat) + "answer/", {"answer": "SQLite."})

    assertContains(empty, "Write the answer.", status_code=400)
    assert answered.status_code == 302
    assert answered["Location"] == chat_url(sub_chat)
    question.refresh_from_db()
    assert (question.status, question.answer, question.answered_by) == (
        "answered",
        "PostgreSQL 17.",
        "user:maintainer",
    )
    assertContains(again, "The question is answered; it takes no answer.", status_code=409)
    assertNotContains(browser.get(chat_url(sub_chat)), 'name="answer"')


@pytest.mark.django_db
def test_who_may_not_answer_a_question_from_its_sub_chat(sub_chat, viewer, users, signed_in):
    question = needs_human(sub_chat)

    as_viewer = signed_in(viewer).post(chat_url(sub_chat) + "answer/", {"answer": "Mine."})
    as_stranger = signed_in(users["stranger"]).post(chat_url(sub_chat) + "answer/", {"answer": "Mine."})

    assert (as_viewer.status_code, as_stranger.status_code) == (403, 404)
    question.refresh_from_db()
    assert question.status == "needs_human"


def approves(response) -> set[str]:
    found = re.search(r'data-approves="([^"]*)"', response.content.decode())
    assert found, "the chat page names no tools to approve"
    return set(found.group(1).split())


def test_the_chat_page_offers_approval_buttons_to_those_who_may_decide(
    signed_in, client, session, sub_chat, users, agent
):
    assert {"propose_changeset", "create_knowledge"} <= approves(
        signed_in(users["member"]).get(chat_url(session))
    )
    for name in ("maintainer", "owner"):
        offered = approves(signed_in(users[name]).get(chat_url(sub_chat)))
        assert {"propose_changeset", "create_knowledge"} <= offered, name
    member_offered = approves(signed_in(users["member"]).get(chat_url(sub_chat)))
    assert "create_knowledge" in member_offered
    assert "propose_changeset" not in member_offered
    assert approves(signed_in(agent).get(chat_url(sub_chat))) == set()


@pytest.mark.django_db
def test_an_answer_from_the_sub_chat_is_kept_as_a_decision_unless_one_off(
    sub_chat, chat_project, maintainer, agent, signed_in
):
    question = needs_human(sub_chat)
    browser = signed_in(maintainer)
    assertContains(browser.get(chat_url(sub_chat)), "One-off: don't keep this answer as a decision")

    browser.post(chat_url(sub_chat) + "answer/", {"answer": "PostgreSQL 17."})

    question.refresh_from_db()
    assert question.decision is not None
    assert question.decision.title == "Answer: Which <b>database</b>?"
    assert question.decision.revisions.get().actor == f"planner:{sub_chat.pk}"
    assertContains(browser.get(chat_url(sub_chat)), f"Kept as a decision: knowledge:{question.decision_id}.")

    other = Question.objects.create(project=chat_project, asker=agent, text="Which cache?", started=True)
    other_chat = session_create(user=agent, project=chat_project, title="Which cache?")
    other_chat.question = other
    other_chat.save(update_fields=["question"])
    needs_human(other_chat)
    browser.post(chat_url(other_chat) + "answer/", {"answer": "Redis, for now.", "one_off": "on"})

    other.refresh_from_db()
    assert (other.status, other.one_off, other.decision_id) == ("answered", True, None)
    assertContains(browser.get(chat_url(other_chat)), "A one-off answer: not kept as a decision")


def relayed_answer(sub_chat, human) -> Question:
    """The sub-chat's question, answered by the planner in its words of ``human``'s reply."""
    question = sub_chat.question
    HumanRequest.objects.create(
        session=sub_chat,
        turn=1,
        tool_use_id="toolu_relayed",
        kind=RequestKind.QUESTION,
        question="Replica or primary?",
        status=RequestStatus.ANSWERED,
        answer="The replica.",
        answered_by=human,
    )
    Question.objects.filter(pk=question.pk).update(
        status="answered",
        answer="Use the replica, says maintainer.",
        answered_by=f"user:{human.username}",
        answered_via=f"planner:{sub_chat.pk}",
        human=human,
    )
    question.refresh_from_db()
    return question


def test_the_human_confirms_the_planners_words_from_the_sub_chat(sub_chat, agent, maintainer, signed_in):
    question = relayed_answer(sub_chat, maintainer)

    asker = signed_in(agent)
    to_asker = asker.get(chat_url(sub_chat))
    refused = asker.post(chat_url(sub_chat) + "confirm/")
    human = signed_in(maintainer)
    shown = human.get(chat_url(sub_chat))
    confirmed = human.post(chat_url(sub_chat) + "confirm/")
    after = human.get(chat_url(sub_chat))

    assertContains(shown, "Answer by the planner, from maintainer's reply: </span>", html=False)
    assertContains(shown, "Confirm as my answer")
    assertContains(
        to_asker, "kept as a decision and given to later questions only once maintainer confirms them"
    )
    assertNotContains(to_asker, "Confirm as my answer")
    message = "Only maintainer, on whose reply the planner answered, confirms its words."
    assertContains(refused, message, status_code=403)
    assert (confirmed.status_code, confirmed["Location"]) == (302, chat_url(sub_chat))
    question.refresh_from_db()
    assert question.confirmed
    assert question.decision is not None
    assert question.decision.author == maintainer
    assertNotContains(after, "Confirm as my answer")
    assertContains(after, f"Kept as a decision: knowledge:{question.decision_id}.")
