"""A long chat's compaction leaves knowledge drafts its owner publishes, live in every tab, and an
agent's brief then includes (SPEC § 6.4, docs/domain.md#drafts)."""

from __future__ import annotations

import pytest
from django.test import AsyncClient

from knowledge.models import KnowledgeEntry
from planner.agent.messages import Usage
from planner.models import KnowledgeDraft
from tests.factories import make_key
from tests.fakes.scripted import say
from tests.planner.conftest import frames_until, open_socket, sync
from tests.planner.live.test_runner_promises import compacting_session  # noqa: F401 (a fixture)
from tests.planner.web.test_api import client_for
from tracker.services.activity import Actor
from tracker.services.items import item_create

pytestmark = pytest.mark.django_db(transaction=True)


def _summary(key: str) -> str:
    return (
        f"**Goal and context**: Guests pay their fee by card ({key}).\n\n"
        f"**Decisions and agreements**: Card payments go through Stripe Checkout ({key}).\n\n"
        "**Constraints**: None.\n\n**Plan facts**: nothing new.\n\n**Changesets**: none.\n\n"
        "**Open questions and next steps**: None."
    )


async def test_a_compaction_drafts_what_its_owner_publishes_and_a_brief_then_includes(
    scripted,
    compacting_session,  # noqa: F811
    member,
    owner,
):
    session = compacting_session
    ticket = await sync(
        lambda: item_create(
            actor=Actor(user=owner), project=session.project, kind="ticket", fields={"title": "Guest fee"}
        )
    )()
    scripted.add(say("A1", usage=Usage(input_tokens=5000)))
    ws = await open_socket(session, member)
    await ws.send_json_to({"type": "message", "text": f"Plan {ticket.key}"})
    await frames_until(ws, "turn_ended")
    other = await open_socket(session, member)  # a second tab of the owner's
    scripted.add(say(_summary(ticket.key)), say("A2"))
    await ws.send_json_to({"type": "message", "text": "Go on"})
    for socket in (ws, other):
        (compacted,) = [f for f in await frames_until(socket, "turn_ended") if f["type"] == "compacted"]
        assert compacted["drafts"] == 2

    client = await client_for(member)
    body = (await client.get(f"/api/v1/planner/sessions/{session.pk}")).json()
    assert [(d["section"], d["status"], d["items"]) for d in body["drafts"]] == [
        ("goals", "pending", [ticket.key]),
        ("decisions", "pending", [ticket.key]),
    ]
    decisions = body["drafts"][1]["id"]
    published = await client.post(
        f"/api/v1/planner/sessions/{session.pk}/drafts/{decisions}/publish/",
        {},
        content_type="application/json",
    )
    assert published.status_code == 200, published.content
    for socket in (ws, other):
        (told,) = [f for f in await frames_until(socket, "knowledge_draft") if f["type"] == "knowledge_draft"]
        assert (told["id"], told["status"], told["entry"]) == (
            decisions,
            "published",
            published.json()["entry"],
        )
        assert told["url"] == published.json()["url"]
        await socket.disconnect()

    # An agent's brief of the ticket reads the published decision.
    raw = await sync(lambda: make_key(member, "read"))()
    url = f"/api/v1/projects/{session.project.key}/items/{ticket.key}/brief/"
    got = await AsyncClient().get(url, headers={"Authorization": f"Bearer {raw}"})
    assert got.status_code == 200, got.content
    brief = got.json()
    assert [k["title"] for k in brief["knowledge"]] == [body["drafts"][1]["title"]]
    assert await sync(KnowledgeEntry.objects.count)() == 1
    assert await sync(KnowledgeDraft.objects.filter(status="pending").count)() == 1
