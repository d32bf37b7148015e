"""Knowledge drafts from a compaction's summary (SPEC § 6.4, docs/domain.md#drafts): drafted for the
session's owner only, published as ordinary knowledge (search, briefs, feed), discarded for good."""

from __future__ import annotations

import pytest

from knowledge.models import KnowledgeEntry
from knowledge.selectors import knowledge_find
from planner.domain.services.drafts import drafts_from_summary
from planner.domain.services.notes import notes_for, notes_summary
from planner.domain.services.sessions import session_create
from planner.models import DraftStatus, KnowledgeDraft, Question
from tracker.models import ActivityEvent, Membership, Role

pytestmark = pytest.mark.django_db

SUMMARY = """- **Goal and context**: Ship guest payments for the launch ({epic}).
- **Decisions and agreements**:
  - Card payments go through Stripe Checkout, not Elements ({ticket}), to keep PCI scope small.
- **Constraints**: None.
- **Plan facts**: {ticket} is ready.
- **Changesets**: none.
- **Open questions and next steps**: Who owns refunds? OTHER-9 is not ours."""


@pytest.fixture
def plan(make_item):
    epic = make_item(kind="epic", title="Payments")
    ticket = make_item(title="Guest fee by card")
    return epic, ticket


@pytest.fixture
def chat(project, member):
    return session_create(user=member, project=project, title="Payments replan")


def _drafted(chat, plan, up_to=4) -> list[KnowledgeDraft]:
    epic, ticket = plan
    drafts_from_summary(chat, summary=SUMMARY.format(epic=epic.key, ticket=ticket.key), up_to=up_to)
    return list(KnowledgeDraft.objects.filter(session=chat).order_by("pk"))


def _url(chat, suffix: str = "") -> str:
    return f"/api/v1/planner/sessions/{chat.pk}/drafts/{suffix}"


def test_a_summary_drafts_its_goal_decisions_and_open_questions_linked_to_the_items_it_names(chat, plan):
    epic, ticket = plan
    drafts = _drafted(chat, plan)
    assert [(d.section, d.kind, d.status) for d in drafts] == [
        ("goals", "note", "pending"),
        ("decisions", "decision", "pending"),
        ("questions", "note", "pending"),
    ]  # "Constraints: None." says nothing; plan facts and changesets stay in the chat
    assert drafts[1].title == "Decisions — Payments replan"
    assert "Stripe Checkout" in drafts[1].body
    assert [i.key for i in drafts[0].items.all()] == [epic.key]
    assert [i.key for i in drafts[1].items.all()] == [ticket.key]
    assert list(drafts[2].items.all()) == []  # OTHER-9 names no item of the project
    assert not KnowledgeEntry.objects.exists()  # a draft is not knowledge


def test_drafts_reach_no_search_until_published(chat, plan, member, client_for, indexed):
    with indexed():
        drafts = _drafted(chat, plan)
    assert knowledge_find(user=member, organization_id=chat.project.organization_id, query="Stripe") == []
    with indexed():
        response = client_for(member).post(_url(chat, f"{drafts[1].pk}/publish/"), {}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "published"
    found = knowledge_find(user=member, organization_id=chat.project.organization_id, query="Stripe")
    assert [int(hit.key) for hit in found] == [response.json()["entry"]]  # ordinary knowledge now


def test_the_owner_publishes_a_draft_as_ordinary_knowledge_the_brief_then_includes(
    chat, plan, member, client_for, django_capture_on_commit_callbacks
):
    ticket = plan[1]
    decisions = _drafted(chat, plan)[1]
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(member).post(_url(chat, f"{decisions.pk}/publish/"), {}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    entry = KnowledgeEntry.objects.get(pk=body["entry"])
    assert (entry.kind, entry.title, entry.author) == ("decision", "Decisions — Payments replan", member)
    assert [p.key for p in entry.projects.all()] == [chat.project.key]
    assert [i.key for i in entry.items.all()] == [ticket.key]
    assert entry.revisions.get().actor == f"planner:{chat.pk}"
    brief = client_for(member).get(f"/api/v1/projects/{chat.project.key}/items/{ticket.key}/brief/").json()
    assert [k["title"] for k in brief["knowledge"]] == ["Decisions — Payments replan"]
    again = client_for(member).post(_url(chat, f"{decisions.pk}/publish/"), {}, format="json")
    assert again.status_code == 409
    assert again.json()["error"]["current"]["status"] == "published"
    assert KnowledgeEntry.objects.count() == 1


def test_the_owner_may_correct_a_draft_as_they_publish_it(chat, plan, member, client_for):
    goal = _drafted(chat, plan)[0]
    changes = {"kind": "document", "title": "Launch goal", "body": "Guests pay by card at launch."}
    response = client_for(member).post(_url(chat, f"{goal.pk}/publish/"), changes, format="json")
    assert response.status_code == 200, response.content
    entry = KnowledgeEntry.objects.get(pk=response.json()["entry"])
    assert (entry.kind, entry.title, entry.body) == (
        "document",
        "Launch goal",
        "Guests pay by card at launch.",
    )
    for bad in ({"kind": "poem"}, {"title": ""}, {"body": "a\x00b"}, {"unknown": 1}):
        refused = client_for(member).post(
            _url(chat, f"{_drafted(chat, plan)[2].pk}/publish/"), bad, format="json"
        )
        assert refused.status_code == 400, bad
    assert KnowledgeEntry.objects.count() == 1


def test_a_discarded_draft_never_becomes_knowledge(chat, plan, member, client_for):
    questions = _drafted(chat, plan)[2]
    response = client_for(member).post(_url(chat, f"{questions.pk}/discard/"))
    assert response.status_code == 200
    assert response.json()["status"] == "discarded"
    late = client_for(member).post(_url(chat, f"{questions.pk}/publish/"), {}, format="json")
    assert late.status_code == 409
    assert not KnowledgeEntry.objects.exists()


@pytest.mark.parametrize("who", ["owner", "maintainer", "viewer", "stranger"])
def test_nobody_but_the_sessions_owner_sees_or_decides_its_drafts(chat, plan, users, client_for, who):
    drafts = _drafted(chat, plan)
    refused_everything(client_for(users[who]), chat, drafts[0])


def refused_everything(client, chat, draft) -> None:
    """``client`` neither lists, publishes nor discards ``chat``'s drafts (404), and none moved."""
    assert client.get(_url(chat)).status_code == 404
    assert client.post(_url(chat, f"{draft.pk}/publish/"), {}, format="json").status_code == 404
    assert client.post(_url(chat, f"{draft.pk}/discard/")).status_code == 404
    assert {d.status for d in KnowledgeDraft.objects.all()} == {DraftStatus.PENDING}
    assert not KnowledgeEntry.objects.exists()


def test_the_owner_reads_their_drafts_oldest_first(chat, plan, member, client_for):
    _drafted(chat, plan)
    listed = client_for(member).get(_url(chat)).json()
    assert [(d["section"], d["status"], d["entry"]) for d in listed] == [
        ("goals", "pending", None),
        ("decisions", "pending", None),
        ("questions", "pending", None),
    ]


def test_an_owner_who_lost_knowledge_write_cannot_publish(chat, plan, member, client_for):
    goal = _drafted(chat, plan)[0]
    Membership.objects.filter(user=member, project=chat.project).update(role=Role.VIEWER)
    response = client_for(member).post(_url(chat, f"{goal.pk}/publish/"), {}, format="json")
    assert response.status_code in (403, 404)
    assert not KnowledgeEntry.objects.exists()
    assert KnowledgeDraft.objects.get(pk=goal.pk).status == DraftStatus.PENDING


def test_a_later_compaction_replaces_pending_drafts_and_never_redrafts_a_published_one(
    chat, plan, member, client_for
):
    drafts = _drafted(chat, plan)
    client_for(member).post(_url(chat, f"{drafts[1].pk}/publish/"), {}, format="json")
    again = _drafted(chat, plan, up_to=9)
    assert len(again) == 3  # the goal and the questions updated in place, the decisions not redrafted
    assert [(d.pk, d.summary_up_to) for d in again if d.status == "pending"] == [
        (drafts[0].pk, 9),
        (drafts[2].pk, 9),
    ]


def test_no_drafts_for_an_owner_who_may_not_write_knowledge_nor_in_a_questions_sub_chat(
    project, plan, member
):
    epic, ticket = plan
    text = SUMMARY.format(epic=epic.key, ticket=ticket.key)
    demoted = session_create(user=member, project=project)
    Membership.objects.filter(user=member, project=project).update(role=Role.VIEWER)
    assert drafts_from_summary(demoted, summary=text, up_to=3) == 0
    Membership.objects.filter(user=member, project=project).update(role=Role.MEMBER)
    asked = session_create(user=member, project=project)
    asked.question = Question.objects.create(project=project, asker=member, text="Who owns refunds?")
    asked.save()
    assert drafts_from_summary(asked, summary=text, up_to=3) == 0
    assert not KnowledgeDraft.objects.exists()


def test_a_published_draft_reaches_another_chats_change_notes(chat, plan, member, owner, client_for):
    decisions = _drafted(chat, plan)[1]
    ActivityEvent.objects.all().delete()  # only what the publishing does
    entry = client_for(member).post(_url(chat, f"{decisions.pk}/publish/"), {}, format="json").json()["entry"]
    events = list(ActivityEvent.objects.order_by("seq"))
    own = notes_for(events, session_label=f"planner:{chat.pk}", project=chat.project, user=member, focus=())
    assert own == []  # the chat that drafted it is not told of its own write
    noted = notes_for(events, session_label="planner:another", project=chat.project, user=owner, focus=())
    assert notes_summary(noted) == f"knowledge #{entry} created by {member.username} in a planner chat"
