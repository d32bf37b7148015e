"""A knowledge write the planner made shows as the same card in every open tab of the chat
(docs/domain.md#knowledge-cards), as a changeset's does: a ``draft`` frame naming the entry, with
its diff."""

from __future__ import annotations

import pytest

from knowledge.models import KnowledgeEntry
from tests.fakes.scripted import call, say
from tests.planner.conftest import frames_until, sync
from tests.planner.web.test_consumer import connect

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_knowledge_write_reaches_every_tab_as_a_card_with_its_diff(scripted, session, member):
    note = {"kind": "decision", "title": "Refunds", "body": "Refunds within 7 days."}
    scripted.add(call("create_knowledge", note), say("Recorded."))
    tabs = [await connect(session, member), await connect(session, member)]
    for tab in tabs:
        await tab.receive_json_from()  # state
    await tabs[0].send_json_to({"type": "message", "text": "Record the refund rule"})
    entry = None
    for tab in tabs:
        (card,) = [f for f in await frames_until(tab, "turn_ended") if f["type"] == "draft"]
        entry = entry or await sync(KnowledgeEntry.objects.get)()
        assert (card["kind"], card["artifact_id"]) == ("knowledge", f"knowledge:{entry.pk}")
        assert (card["snapshot"]["op"], card["snapshot"]["title"]) == ("create", "Refunds")
        assert card["snapshot"]["diff"] == [{"op": "added", "text": "Refunds within 7 days."}]
        await tab.disconnect()
