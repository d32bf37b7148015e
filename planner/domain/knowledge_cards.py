"""The planner's knowledge writes as cards in the chat (docs/domain.md#knowledge-cards).

A ``create_knowledge`` or ``update_knowledge`` call that ran shows as a card: the entry, a link
to it, and its diff against the revision before (``knowledge/diffs.py``), live in every tab
(a ``draft`` frame of kind ``knowledge``) and in the transcript (:func:`knowledge_cards_of`).
One that waits for approval (the project's ``approve_tools``) shows the same diff, against the
entry as it stands, in the request (:func:`knowledge_preview`), with Publish and Discard.
"""

from __future__ import annotations

from typing import Any

from knowledge.diffs import proposed_change, revision_change
from knowledge.models import KnowledgeEntry
from planner.agent.frames import KnowledgePreview, PreviewRow
from planner.models import Session, ToolCall
from tracker.models import Project
from tracker.page_links import knowledge_url

WRITES = ("create_knowledge", "update_knowledge")


def knowledge_card(entry: KnowledgeEntry, version: int, *, project_key: str) -> dict[str, Any] | None:
    """Revision ``version`` of ``entry`` as its card shows it; None if the revision is gone."""
    change = revision_change(entry, version)
    if change is None:
        return None
    return {**change, "url": knowledge_url(project_key, entry.pk)}


def knowledge_cards_of(*, session: Session) -> dict[str, dict[str, Any]]:
    """The cards of the session's knowledge writes that ran, by tool_use_id; a write to an entry
    no longer linked to the session's project (so perhaps not readable by all the session's
    readers) shows no card."""
    calls = ToolCall.objects.filter(session=session, name__in=WRITES, is_error=False)
    wrote: dict[str, tuple[int, int]] = {}
    for call in calls.only("tool_use_id", "output"):
        output = call.output if isinstance(call.output, dict) else {}
        entry_id, version = output.get("id"), output.get("version")
        if isinstance(entry_id, int) and isinstance(version, int):
            wrote[call.tool_use_id] = (entry_id, version)
    if not wrote:
        return {}
    linked = KnowledgeEntry.objects.filter(
        pk__in={entry_id for entry_id, _ in wrote.values()}, projects=session.project_id
    )
    entries = {entry.pk: entry for entry in linked}
    cards: dict[str, dict[str, Any]] = {}
    for tool_use_id, (entry_id, version) in wrote.items():
        entry = entries.get(entry_id)
        card = knowledge_card(entry, version, project_key=session.project.key) if entry else None
        if card is not None:
            cards[tool_use_id] = card
    return cards


def knowledge_preview(input: dict[str, Any], project: Project) -> list[PreviewRow]:
    """The write a knowledge call waiting for approval would make, against the entry as it stands.

    Whoever may approve reads this project, but perhaps not the others an entry is linked to: an
    entry linked beyond this project is not shown (``hidden``), only what the call would write;
    no such entry at all is a new entry's diff (the call then fails, readably, once approved).
    """
    entry = None
    hidden = False
    if isinstance(input.get("id"), int):
        found = KnowledgeEntry.objects.filter(pk=input["id"], organization_id=project.organization_id).first()
        if found is not None and set(found.projects.values_list("pk", flat=True)) <= {project.pk}:
            entry = found
        hidden = found is not None and entry is None
    change = proposed_change(entry, {k: input[k] for k in ("kind", "title", "body") if k in input})
    sent = input.get("version")
    row: KnowledgePreview = {
        "kind": "knowledge",
        "id": input["id"] if isinstance(input.get("id"), int) else None,
        "op": "update" if "id" in input else "create",
        "entry_kind": change["kind"],
        "title": change["title"],
        "previous": change["previous"],
        "diff": change["diff"],
        "stale": entry is not None and isinstance(sent, int) and sent != entry.version,
        "hidden": hidden,
    }
    return [row]
