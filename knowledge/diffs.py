"""What a knowledge write changed, as the chat's cards show it (docs/domain.md#knowledge-cards).

:func:`text_diff` compares two bodies line by line (``difflib``), keeping a few lines of
context around each change and folding long unchanged runs into one ``skip`` row; a diff longer
than :data:`MAX_ROWS` is cut and says so. :func:`revision_change` is one revision of an entry
against the one before it; :func:`proposed_change` is a write the planner asks to make, against
the entry as it stands.
"""

from __future__ import annotations

import difflib
from typing import Any, Literal, TypedDict

from knowledge.models import KnowledgeEntry, KnowledgeRevision

CONTEXT = 2  # unchanged lines kept around a change
MAX_ROWS = 400
MAX_LINE = 1000  # characters of one row


class DiffRow(TypedDict):
    op: Literal["same", "added", "removed", "skip", "cut"]
    text: str


def _row(op: Literal["same", "added", "removed", "skip", "cut"], text: str) -> DiffRow:
    return {"op": op, "text": text if len(text) <= MAX_LINE else text[:MAX_LINE] + " …"}


def text_diff(before: str, after: str) -> list[DiffRow]:
    """``after`` against ``before``, line by line: every added and removed line, ``CONTEXT``
    unchanged lines around each change, and a ``skip`` row for each longer unchanged run."""
    old, new = before.splitlines(), after.splitlines()
    rows: list[DiffRow] = []
    opcodes = difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal":
            same = old[i1:i2]
            first, last = index == 0, index == len(opcodes) - 1
            head = [] if first else same[:CONTEXT]
            tail = [] if last else same[-CONTEXT:]
            if len(same) <= len(head) + len(tail) + 1:
                rows.extend(_row("same", line) for line in same)
                continue
            rows.extend(_row("same", line) for line in head)
            skipped = len(same) - len(head) - len(tail)
            rows.append(_row("skip", f"{skipped} unchanged line{'s' if skipped != 1 else ''}"))
            rows.extend(_row("same", line) for line in tail)
            continue
        rows.extend(_row("removed", line) for line in old[i1:i2])
        rows.extend(_row("added", line) for line in new[j1:j2])
    if len(rows) > MAX_ROWS:
        hidden = len(rows) - MAX_ROWS
        rows = [*rows[:MAX_ROWS], _row("cut", f"{hidden} more lines of changes: open the entry to read them")]
    return rows


def _fields(kind: str, title: str, version: int | None) -> dict[str, Any]:
    return {"kind": kind, "title": title, "version": version}


def revision_change(entry: KnowledgeEntry, version: int) -> dict[str, Any] | None:
    """Revision ``version`` of ``entry`` against the one before it (the first: against nothing);
    None if the revision is not there."""
    revisions = {
        r.version: r
        for r in KnowledgeRevision.objects.filter(entry=entry, version__in=[version - 1, version])
    }
    now = revisions.get(version)
    if now is None:
        return None
    before = revisions.get(version - 1)
    return {
        "id": entry.pk,
        "op": "update" if before is not None else "create",
        **_fields(now.kind, now.title, version),
        "previous": _fields(before.kind, before.title, before.version) if before is not None else None,
        "diff": text_diff(before.body if before is not None else "", now.body),
    }


def proposed_change(entry: KnowledgeEntry | None, fields: dict[str, Any]) -> dict[str, Any]:
    """The write ``fields`` (kind, title, body; any missing: unchanged) would make to ``entry`` as
    it stands (None: a new entry)."""
    kind = str(fields.get("kind", entry.kind if entry is not None else ""))
    title = str(fields.get("title", entry.title if entry is not None else ""))
    body = fields.get("body", entry.body if entry is not None else "")
    return {
        "id": entry.pk if entry is not None else None,
        "op": "update" if entry is not None else "create",
        **_fields(kind, title, None),
        "previous": _fields(entry.kind, entry.title, entry.version) if entry is not None else None,
        "diff": text_diff(entry.body if entry is not None else "", body if isinstance(body, str) else ""),
    }
