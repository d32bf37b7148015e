"""Chats (docs/protocol.md): rename and archive over REST (the owner only), the title the planner
proposes after the first turn, and the chat list's search."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from planner.agent.calls import GatewayError
from planner.agent.messages import ModelRequest, ModelResponse, Usage
from planner.domain.services.agent_questions import question_create
from planner.domain.services.chats import proposed_title
from planner.domain.services.sessions import session_begin, session_create
from planner.live import titles
from planner.live.at_once import AtOnce
from planner.live.runner import Runner, runner
from planner.live.titles import TITLE_SYSTEM
from planner.models import Session, UsageRecord
from tests.factories import MembershipFactory, ProjectFactory, UserFactory, make_membership, make_project
from tests.fakes.messages_api import TITLE_SYSTEM_OPENING
from tests.fakes.scripted import Hang, ScriptedGateway, say
from tests.planner.api_client import client_for as token_client
from tests.planner.conftest import drive, eventually, frames_until, open_socket, sync
from tracker.services.activity import Actor
from tracker.services.projects import membership_remove, project_update


def detail_url(session: Session) -> str:
    return f"/api/v1/planner/sessions/{session.pk}"


def fresh(session: Session) -> Session:
    return Session.objects.get(pk=session.pk)


# ---------------------------------------------------------------- REST: rename and archive
# (transactional: the endpoint reads and writes on the runner's database threads)


@pytest.mark.django_db(transaction=True)
def test_the_owner_renames_a_chat(client_for, session, member):
    response = client_for(member).patch(detail_url(session), {"title": "  Checkout plan  "}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["title"] == "Checkout plan"
    assert response.json()["title_source"] == "human"
    assert (fresh(session).title, fresh(session).title_source) == ("Checkout plan", "human")
    shown = client_for(member).get(detail_url(session)).json()
    assert (shown["title"], shown["title_source"], shown["archived_at"]) == ("Checkout plan", "human", None)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"title": "   "}, "Write a title."),
        ({"title": "x" * 201}, "At most 200 characters."),
        ({"title": "two\nlines"}, "A title is one line without control characters."),
        ({"title": "bell\x07"}, "A title is one line without control characters."),
        ({"title": "nul\x00"}, "NUL characters are not allowed."),
        ({"title": "\u202eevil"}, "A title is one line without control characters."),
        ({"title": 42}, "Expected a string."),
        ({"title": None}, "This field may not be null."),
        ({}, "Send a title, archived, or both."),
    ],
)
def test_a_bad_title_is_refused_with_its_field(client_for, session, member, body, message):
    response = client_for(member).patch(detail_url(session), body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"]["title"] == [message]
    assert fresh(session).title == ""


@pytest.mark.django_db(transaction=True)
def test_unknown_fields_and_a_bad_body_are_refused(client_for, session, member):
    client = client_for(member)
    extra = client.patch(detail_url(session), {"title": "Fine", "state": "idle"}, format="json")
    assert extra.status_code == 400
    assert extra.json()["error"]["fields"] == {"state": ["Unknown field."]}
    broken = client.patch(detail_url(session), "{not json", content_type="application/json")
    assert broken.status_code == 400
    assert fresh(session).title == ""


@pytest.fixture
def outsiders(org, project, member, users) -> dict[str, User]:
    """Everyone who is not the session's owner: each must be told the session does not exist."""
    sibling = ProjectFactory(organization=org, key="SIB", name="Sibling")
    next_door = UserFactory(username="next-door")
    MembershipFactory(project=sibling, user=next_door, role="owner")
    colleague = UserFactory(username="colleague")
    MembershipFactory(project=project, user=colleague, role="member")  # has planner.chat too
    return {
        "another member with planner.chat": colleague,
        "a maintainer": users["maintainer"],
        "the project's owner (admin)": users["owner"],
        "a viewer": users["viewer"],
        "a member of another project of the organization": next_door,
        "a stranger": users["stranger"],
        "a superuser": UserFactory(username="root", is_superuser=True, is_staff=True),
    }


@pytest.mark.django_db(transaction=True)
def test_only_the_owner_may_rename_or_archive(client_for, session, outsiders):
    for who, user in outsiders.items():
        client = client_for(user)
        renamed = client.patch(detail_url(session), {"title": "Mine now"}, format="json")
        assert renamed.status_code == 404, who
        assert renamed.json()["error"]["code"] == "not_found", who
        assert client.delete(detail_url(session)).status_code == 404, who
        # Bad input from someone else is not looked at: still "not found".
        assert client.patch(detail_url(session), {"title": 7}, format="json").status_code == 404, who
    after = fresh(session)
    assert (after.title, after.title_source, after.archived_at) == ("", "", None)


@pytest.mark.django_db(transaction=True)
def test_anonymous_callers_are_refused(client_for, session):
    anonymous = client_for(None)
    assert anonymous.patch(detail_url(session), {"title": "X"}, format="json").status_code in (401, 403)
    assert anonymous.delete(detail_url(session)).status_code in (401, 403)
    assert fresh(session).archived_at is None


@pytest.mark.django_db(transaction=True)
def test_a_removed_member_can_no_longer_rename_or_archive_their_chat(client_for, session, member, owner):
    membership_remove(actor=Actor(user=owner), project=session.project, username=member.username)
    client = client_for(member)
    assert client.patch(detail_url(session), {"title": "Still mine?"}, format="json").status_code == 404
    assert client.delete(detail_url(session)).status_code == 404
    assert fresh(session).archived_at is None


@pytest.mark.django_db(transaction=True)
def test_a_question_sub_chat_is_readable_by_members_but_only_its_asker_renames_it(
    client_for, chat_project, member, maintainer
):
    question = question_create(user=member, project=chat_project, text="Is BAL-1 ready?")
    sub_chat = Session.objects.get(question=question)
    other = client_for(maintainer)
    assert other.get(detail_url(sub_chat)).status_code == 200  # members may read and answer it
    assert other.patch(detail_url(sub_chat), {"title": "Hijacked"}, format="json").status_code == 404
    assert other.delete(detail_url(sub_chat)).status_code == 404
    asker = client_for(member)
    assert asker.patch(detail_url(sub_chat), {"title": "Readiness"}, format="json").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_title_given_at_creation_is_the_humans(client_for, chat_project, member):
    client = client_for(member)
    named = client.post("/api/v1/planner/sessions/", {"project": "BAL", "title": " Roadmap "}, format="json")
    unnamed = client.post("/api/v1/planner/sessions/", {"project": "BAL"}, format="json")
    assert (named.json()["title"], named.json()["title_source"]) == ("Roadmap", "human")
    assert (unnamed.json()["title"], unnamed.json()["title_source"]) == ("", "")


@pytest.mark.django_db(transaction=True)
def test_a_sub_chat_keeps_its_parent_and_rest_answers_it(client_for, session, member):
    client = client_for(member)
    created = client.post(
        "/api/v1/planner/sessions/", {"project": "BAL", "parent": str(session.pk)}, format="json"
    )
    assert created.status_code == 201, created.content
    assert created.json()["parent"] == str(session.pk)
    child = Session.objects.get(pk=created.json()["id"])
    assert child.parent_id == session.pk
    assert client.get(detail_url(child)).json()["parent"] == str(session.pk)
    assert client.get(detail_url(session)).json()["parent"] is None


@pytest.mark.django_db(transaction=True)
def test_a_sub_chat_of_a_chat_in_another_project_is_refused(client_for, session, member, org):
    sibling = make_project(organization=org, key="SIB", name="Sibling")
    make_membership(project=sibling, user=member, role="member")
    elsewhere = session_create(user=member, project=sibling)
    refused = client_for(member).post(
        "/api/v1/planner/sessions/", {"project": "BAL", "parent": str(elsewhere.pk)}, format="json"
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"] == {"parent": ["A sub-chat belongs to its parent's project."]}
    assert not Session.objects.filter(parent=elsewhere).exists()


@pytest.mark.django_db(transaction=True)
def test_an_archived_chat_leaves_the_lists_but_its_transcript_stays(client_for, session, member):
    session_begin(session_id=session.pk, user=member, text="Keep this for the record")
    Session.objects.filter(pk=session.pk).update(state="idle", turn_owner="")
    kept = session_create(user=member, project=session.project, title="Kept")
    client = client_for(member)

    archived = client.delete(detail_url(session))
    assert archived.status_code == 204
    assert archived.content == b""
    again = client.delete(detail_url(session))  # idempotent: archived once, at the first time
    assert again.status_code == 204
    first_time = fresh(session).archived_at
    assert first_time is not None

    listed = client.get("/api/v1/planner/sessions/").json()["results"]
    assert [row["id"] for row in listed] == [str(kept.pk)]
    assert client.get("/api/v1/planner/sessions/?q=record").json()["results"] == []  # its title matches
    assert client.get("/api/v1/planner/sessions/?q=KEP").json()["results"][0]["id"] == str(kept.pk)
    assert client.get("/api/v1/planner/sessions/?project=BAL").json()["results"][0]["id"] == str(kept.pk)
    transcript = client.get(detail_url(session)).json()
    assert transcript["messages"][0]["content"] == [{"type": "text", "text": "Keep this for the record"}]
    assert transcript["archived_at"] is not None
    assert transcript["can_send"] is False
    assert fresh(session).archived_at == first_time
    # It can still be renamed (its owner finds it by its address).
    assert client.patch(detail_url(session), {"title": "Old plan"}, format="json").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_an_archived_chat_takes_no_more_messages(client_for, session, member):
    client = client_for(member)
    assert client.delete(detail_url(session)).status_code == 204
    sent = client.post(f"{detail_url(session)}/messages/", {"text": "Hello?"}, format="json")
    assert sent.status_code == 409
    assert sent.json()["error"]["message"].startswith("This chat is archived")
    assert fresh(session).turn_count == 0
    assert fresh(session).last_message_seq == 0


@pytest.mark.django_db(transaction=True)
def test_a_running_chat_is_not_archived(client_for, session, member):
    session_begin(session_id=session.pk, user=member, text="Work on it")  # the turn runs (its row says)
    refused = client_for(member).delete(detail_url(session))
    assert refused.status_code == 409
    assert "stop its turn" in refused.json()["error"]["message"]
    assert fresh(session).archived_at is None


# ---------------------------------------------------------------- the planner's title


def test_a_proposed_title_is_made_safe():
    assert proposed_title('"Shipping the checkout."\nAnd more words') == "Shipping the checkout"
    assert proposed_title("\n\n  Title: **Release\u0007 plan**  ") == "Release plan"
    assert proposed_title("\u201cQuarterly\u202e roadmap\u201d") == "Quarterly roadmap"
    assert proposed_title("<b>Plan</b>") == "<b>Plan</b>"  # text: the page never parses it as HTML
    long = proposed_title("word " * 100)
    assert long is not None
    assert len(long) == 80
    assert long.endswith("…")
    assert proposed_title('  ""  \n') is None
    assert proposed_title("") is None


def test_the_fake_messages_api_knows_a_title_request():
    assert TITLE_SYSTEM.startswith(TITLE_SYSTEM_OPENING)


@pytest.mark.django_db(transaction=True)
async def test_the_first_turn_gets_a_title_from_the_title_model(planner, model, session, member, owner):
    await sync(project_update)(
        actor=Actor(user=owner), project=session.project, settings={"title_model": "claude-haiku-test"}
    )
    model.add(say("Ship the checkout in two steps."), say("Done."))
    model.titles.append(say('"Checkout in two steps."', usage=Usage(input_tokens=40, output_tokens=5)))

    await drive(planner, session, member, "How do we ship the checkout?")

    stored = await sync(fresh)(session)
    assert (stored.title, stored.title_source) == ("Checkout in two steps", "planner")
    (request,) = model.title_requests
    assert (request.purpose, request.model, request.tools) == ("title", "claude-haiku-test", ())
    prompt = request.messages[0].text
    assert "How do we ship the checkout?" in prompt
    assert "Ship the checkout in two steps." in prompt
    usage = await sync(lambda: list(UsageRecord.objects.filter(session=session).order_by("pk")))()
    assert [(u.purpose, u.model, u.outcome) for u in usage] == [
        ("turn", "claude-sonnet-5-5", "ok"),
        ("title", "claude-haiku-test", "ok"),
    ]
    assert (usage[1].input_tokens, usage[1].output_tokens) == (40, 5)

    await drive(planner, session, member, "And then?")  # only the first turn is titled
    assert len(model.title_requests) == 1


@pytest.mark.django_db(transaction=True)
async def test_the_default_title_model_is_a_haiku(planner, model, session, member):
    model.add(say("Hello."))
    await drive(planner, session, member, "Hi")
    (request,) = model.title_requests
    assert request.model == "claude-haiku-4-5"


@pytest.mark.django_db(transaction=True)
async def test_a_chat_a_human_named_gets_no_proposal(planner, model, chat_project, member):
    named = await sync(session_create)(user=member, project=chat_project, title="My plan")
    model.add(say("Sure."))
    await drive(planner, named, member, "Plan the release")
    assert model.title_requests == []
    assert (await sync(fresh)(named)).title == "My plan"


@pytest.mark.django_db(transaction=True)
async def test_a_rename_while_the_title_call_runs_wins(planner, model, session, member):
    hang = Hang(then=say("Planner's idea"))
    model.add(say("Here is the plan."))
    model.titles.append(hang)
    await planner.send(session_id=session.pk, user=member, text="Plan the release")
    await hang.started.wait()
    renamed = await (await token_client(member)).patch(detail_url(session), {"title": "Mine"})
    assert renamed.status_code == 200
    hang.release.set()
    await planner.wait(session.pk)
    stored = await sync(fresh)(session)
    assert (stored.title, stored.title_source) == ("Mine", "human")


@pytest.mark.django_db(transaction=True)
async def test_a_failed_title_call_leaves_the_title(planner, model, session, member):
    model.add(say("An answer."))
    model.titles.append(GatewayError("server", "The Anthropic API failed: overloaded"))
    await drive(planner, session, member, "What is next for checkout?")
    stored = await sync(fresh)(session)
    assert (stored.title, stored.title_source) == ("What is next for checkout?", "")
    rows = UsageRecord.objects.values_list("purpose", "outcome").order_by("pk")
    outcomes = await sync(lambda: list(rows))()
    assert outcomes == [("turn", "ok"), ("title", "error")]
    assert stored.state == "idle"


@pytest.mark.django_db(transaction=True)
async def test_an_empty_proposal_is_not_stored(planner, model, session, member):
    model.add(say("An answer."))
    model.titles.append(say('\u0007 "" \n'))
    await drive(planner, session, member, "Something")
    assert ((await sync(fresh)(session)).title_source) == ""


@pytest.mark.django_db(transaction=True)
async def test_no_title_when_the_first_turn_failed(planner, model, session, member):
    model.add(GatewayError("server", "The Anthropic API failed."))
    await drive(planner, session, member, "Hello")
    assert model.title_requests == []


@pytest.mark.django_db(transaction=True)
async def test_no_title_over_the_daily_token_budget(planner, model, session, member, owner):
    await sync(project_update)(
        actor=Actor(user=owner), project=session.project, settings={"daily_token_budget": 100}
    )
    model.add(say("An answer."))  # 100 + 20 tokens: the budget is used up after it
    await drive(planner, session, member, "Hello")
    assert model.title_requests == []
    assert await sync(lambda: UsageRecord.objects.filter(purpose="title").exists())() is False


class DiesAfterTheTitleCall:
    """The model of a process that dies the moment its title call returned: metered, not stored."""

    def __init__(self, inner: ScriptedGateway) -> None:
        self.inner = inner

    async def complete(self, request: ModelRequest, **kwargs: Any) -> ModelResponse:
        response = await self.inner.complete(request, **kwargs)
        if request.purpose == "title":
            raise asyncio.CancelledError  # nothing of this process runs after this point
        return response


def _titles(session: Session) -> list[tuple[str, str]]:
    return list(UsageRecord.objects.filter(session=session).values_list("purpose", "outcome").order_by("pk"))


@pytest.mark.django_db(transaction=True)
async def test_a_title_lost_with_its_process_is_metered_and_proposed_at_the_next_turn_s_end(
    planner, model, session, member
):
    model.add(say("Ship the checkout in two steps."), say("Then the refunds."), say("Done."))
    model.titles += [say("Lost with its process"), say("Checkout in two steps")]
    dying = Runner(gateway=DiesAfterTheTitleCall(model))
    await dying.send(session_id=session.pk, user=member, text="How do we ship the checkout?")
    with contextlib.suppress(asyncio.CancelledError):
        await dying.wait(session.pk)
    metered, left = await sync(_titles)(session), await sync(fresh)(session)

    await drive(planner, session, member, "And then?")  # in the process that serves the chat now
    titled = await sync(fresh)(session)
    await drive(planner, session, member, "Anything else?")

    assert {
        "after the death": (metered, left.title_source),
        "after the next turn": (titled.title, titled.title_source),
        "title calls": len(model.title_requests),
    } == {
        "after the death": ([("turn", "ok"), ("title", "ok")], ""),
        "after the next turn": ("Checkout in two steps", "planner"),
        "title calls": 2,  # none after the chat was named
    }


@pytest.mark.django_db(transaction=True)
async def test_a_chat_whose_proposals_come_back_empty_gets_two_title_calls(planner, model, session, member):
    model.add(say("One."), say("Two."), say("Three."))
    model.titles += [say('""'), say("\u0007")]
    for text in ("First", "Second", "Third"):
        await drive(planner, session, member, text)
    assert (len(model.title_requests), (await sync(fresh)(session)).title_source) == (2, "")


@pytest.mark.django_db(transaction=True)
async def test_watchers_get_the_title_after_turn_ended(scripted, session, member):
    scripted.add(say("An answer."))
    scripted.titles.append(say("Release planning"))
    ws = await open_socket(session, member)
    try:
        await ws.send_json_to({"type": "message", "text": "Plan the release"})
        seen = await frames_until(ws, "title")
        await runner.wait(session.pk)  # its publishing to other processes done, before the loop ends
    finally:
        await ws.disconnect()
    kinds = [frame["type"] for frame in seen]
    assert kinds.index("turn_ended") < kinds.index("title")
    assert seen[-1]["title"] == "Release planning"
    assert "origin" not in seen[-1]


# ---------------------------------------------------------------- the chat list page


@pytest.fixture
def browser(member) -> Client:
    client = Client()
    client.force_login(member)
    return client


@pytest.mark.django_db
def test_the_chat_list_searches_titles(browser, chat_project, member):
    for title in ("Checkout plan", "Release CHECKOUT", "Roadmap"):
        session_create(user=member, project=chat_project, title=title)
    archived = session_create(user=member, project=chat_project, title="Old checkout")
    Session.objects.filter(pk=archived.pk).update(archived_at="2026-01-01T00:00:00Z")
    url = reverse("planner-chat-list", args=["BAL"])

    page = browser.get(url, {"q": "checkout"}).content.decode()
    assert "Checkout plan" in page
    assert "Release CHECKOUT" in page
    assert "Roadmap" not in page
    assert "Old checkout" not in page
    assert '<label for="chat-search-input">Search chats by title</label>' in page
    assert 'value="checkout"' in page

    everything = browser.get(url).content.decode()
    assert "Roadmap" in everything
    assert "Old checkout" not in everything

    none = browser.get(url, {"q": "<nothing>"}).content.decode()
    assert "No chat in BAL has a title containing “&lt;nothing&gt;”." in none
    assert browser.get(url, {"q": "nul\x00"}).status_code == 200


@pytest.mark.django_db
def test_an_archived_chat_page_is_read_only(browser, session, member):
    Session.objects.filter(pk=session.pk).update(archived_at="2026-01-01T00:00:00Z")
    response = browser.get(reverse("planner-chat", args=["BAL", session.pk]))
    page = response.content.decode()
    assert response.status_code == 200
    assert "This chat was archived on" in page
    assert 'id="composer"' not in page
    assert 'id="archive-button"' not in page
    assert 'id="rename-button"' in page


@pytest.mark.django_db
def test_only_the_owner_sees_rename_and_archive(chat_project, member, maintainer):
    question = question_create(user=member, project=chat_project, text="Is BAL-1 ready?")
    url = reverse("planner-chat", args=["BAL", Session.objects.get(question=question).pk])
    client = Client()
    client.force_login(maintainer)  # reads the sub-chat and answers its questions, no more
    page = client.get(url).content.decode()
    assert "Is BAL-1 ready?" in page
    assert 'id="rename-button"' not in page
    assert 'id="archive-button"' not in page
    assert "chat_manage.js" not in page
    client.force_login(member)
    page = client.get(url).content.decode()
    assert 'id="rename-button"' in page
    assert 'id="archive-button"' in page


@pytest.mark.django_db(transaction=True)
async def test_a_message_to_an_archived_chat_over_the_socket_is_refused(scripted, session, member):
    await sync(Session.objects.filter(pk=session.pk).update)(archived_at="2026-01-01T00:00:00Z")
    ws = await open_socket(session, member)  # the transcript stays watchable
    try:
        await ws.send_json_to({"type": "message", "text": "Anyone there?"})
        refused = await ws.receive_json_from(timeout=5)
    finally:
        await ws.disconnect()
    assert refused["type"] == "error"
    assert refused["code"] == "invalid_state"
    assert refused["message"].startswith("This chat is archived")
    assert scripted.requests == []
    assert (await sync(fresh)(session)).last_message_seq == 0


@pytest.mark.django_db(transaction=True)
async def test_a_process_proposes_two_titles_at_a_time_and_the_next_waits_its_turn(
    planner, model, session, member, monkeypatch
):
    monkeypatch.setattr(titles, "AT_ONCE", 2)
    monkeypatch.setattr(titles, "_calls", AtOnce())
    others = [await sync(session_create)(user=member, project=session.project) for _ in range(2)]
    chats = [session, *others]
    first, second = Hang(then=say("First")), Hang(then=say("Second"))
    model.titles.extend([first, second, say("Third")])
    model.add(*(say(f"Answer {n}.") for n in range(3)))

    async def ended(chat: Session) -> bool:
        return (await sync(fresh)(chat)).state == "idle"

    try:
        for n, chat in enumerate(chats):
            await planner.send(session_id=chat.pk, user=member, text=f"Question {n}")
        await first.started.wait()
        await second.started.wait()
        for chat in chats:  # every turn has ended: the third title waits for a turn, not for its chat
            await eventually(lambda chat=chat: ended(chat), 10.0)
        for _ in range(20):
            await asyncio.sleep(0)
        assert len(model.title_requests) == 2

        first.release.set()  # the third is proposed once the first is done, the second still out
        await eventually(lambda: len(model.title_requests) == 3, 10.0)
        assert not second.release.is_set()
    finally:
        first.release.set()
        second.release.set()
    for chat in chats:
        await planner.wait(chat.pk)
    stored = sorted([(await sync(fresh)(chat)).title for chat in chats])
    assert stored == ["First", "Second", "Third"]
