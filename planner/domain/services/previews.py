"""What an approval request shows its human: a tool call's input as readable rows.

:func:`request_preview` turns the input of a tool call that waits for approval
(docs/domain.md) into rows the chat page renders as text: a ``propose_changeset``
call as the admin's changeset review shows its operations (``tracker.review``,
the one description of an operation), any other call as one row per input field.
The input is the model's and never trusted: whatever cannot be read the
changeset way falls back to the generic rows, which cannot fail. The rows' types
are part of the ``request`` frame, in ``planner/agent/frames.py``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from planner.agent.frames import FieldPreview, OperationField, PreviewRow
from planner.domain.knowledge_cards import knowledge_preview
from tracker.models import Project
from tracker.review import operations_review

logger = logging.getLogger(__name__)

MAX_TEXT = 4000  # characters of one value; the full input stays on the request
MAX_ROWS = 100
TRUNCATED = "… (cut short)"


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + TRUNCATED


def _text(value: Any) -> str:
    """``value`` as text: a string as is, anything else as indented JSON."""
    if isinstance(value, str):
        return _cut(value)
    try:
        return _cut(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str))
    except (TypeError, ValueError, RecursionError):
        return "(unreadable value)"


def _field(label: str, value: Any) -> FieldPreview:
    return {"kind": "field", "label": _cut(label), "value": _text(value)}


def generic_preview(input: Any) -> list[PreviewRow]:
    """One row per field of ``input``, in its order; a non-object input is one row."""
    if not isinstance(input, dict):
        return [_field("input", input)]
    rows: list[PreviewRow] = [_field(str(name), value) for name, value in list(input.items())[:MAX_ROWS]]
    if len(input) > MAX_ROWS:
        rows.append(_field("…", f"{len(input) - MAX_ROWS} more fields"))
    return rows


def changeset_preview(input: dict[str, Any], project: Project) -> list[PreviewRow]:
    """The title, the rationale and every operation, validated against the plan as the planner
    would propose it (it may not set policy)."""
    operations = input.get("operations")
    if not isinstance(operations, list):
        raise TypeError("operations is not a list")
    review = operations_review(project=project, operations=operations[:MAX_ROWS], can_set_policy=False)
    rows: list[PreviewRow] = [_field("title", input.get("title", ""))]
    if input.get("rationale"):
        rows.append(_field("rationale", input["rationale"]))
    rows.extend(_field("problem", error) for error in review.general_errors)
    for row in review.operations:
        fields: list[OperationField] = [
            {
                "name": _cut(f.name),
                "label": _cut(f.label),
                "current": _cut(f.current),
                "proposed": _cut(f.proposed),
                "changed": f.changed,
            }
            for f in row.fields
        ]
        rows.append(
            {
                "kind": "operation",
                "index": row.index,
                "op": row.op,
                "label": row.label,
                "subject": _cut(row.subject),
                "fields": fields,
                "blocker": _cut(row.blocker),
                "blocked": _cut(row.blocked),
                "warning": _cut(row.warning),
                "errors": [_cut(error) for error in row.errors],
                "raw": _cut(row.raw),
            }
        )
    if len(operations) > MAX_ROWS:
        rows.append(_field("…", f"{len(operations) - MAX_ROWS} more operations"))
    return rows


READERS = {
    "propose_changeset": changeset_preview,
    "create_knowledge": knowledge_preview,
    "update_knowledge": knowledge_preview,
}


def request_preview(*, tool: str, input: dict[str, Any], project: Project) -> list[PreviewRow]:
    """Readable rows of a tool call's ``input`` for the human asked to approve it; never raises."""
    reader = READERS.get(tool)
    if reader is not None and isinstance(input, dict):
        try:
            return reader(input, project)
        except Exception:  # the model's input is untrusted: any surprise falls back to plain rows
            logger.warning("Preview of a %s call fell back to plain rows", tool, exc_info=True)
    return generic_preview(input)
