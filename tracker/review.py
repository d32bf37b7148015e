"""A changeset made readable for its reviewer: each operation, and its validation state.

:func:`changeset_review` (the admin's review page) and :func:`operations_review`
(the operations alone: the planner's approval preview of ``propose_changeset``)
read the items the operations name (one query) and, for a proposed changeset,
validate it against the current plan as Apply would. They return plain text;
whoever shows it escapes all of it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from tracker.errors import ValidationError
from tracker.models import Changeset, ChangesetStatus, Item, Project
from tracker.selectors import item_number
from tracker.services.changeset_validation import DEFAULT_STATE, ITEM_FIELDS, changeset_validate
from tracker.services.changesets import proposer_can_set_policy

EMPTY = "—"
_PATH = re.compile(r"^operations\[(\d+)\](?:\.(.*))?$")
# Fields as the pages say them (SPEC § 9: "Acceptance criteria", not "acceptance_criteria"); a
# field not listed here reads as its name in words.
FIELD_LABELS = {
    "title": "Title",
    "description": "Description",
    "acceptance_criteria": "Acceptance criteria",
    "state": "State",
    "epic": "Epic",
    "milestone": "Milestone",
    "priority": "Priority",
    "labels": "Labels",
    "policy": "Execution policy",
}
OP_LABELS = {
    "create": "Create",
    "update": "Update",
    "add_dependency": "Add dependency",
    "remove_dependency": "Remove dependency",
}


@dataclass(frozen=True)
class FieldRow:
    """One field of an operation: what it is now (updates only) and what is proposed."""

    name: str
    proposed: str
    current: str = ""
    changed: bool = True

    @property
    def label(self) -> str:
        """The field in words, as a reader says it."""
        return field_label(self.name)


def field_label(name: str) -> str:
    """``acceptance_criteria`` → ``Acceptance criteria``: a field of an item as the pages name it."""
    return FIELD_LABELS.get(name) or name.replace("_", " ").strip().capitalize() or name


@dataclass
class OperationRow:
    """One operation as the reviewer reads it."""

    index: int
    op: str
    label: str
    subject: str = ""
    fields: list[FieldRow] = field(default_factory=list)
    blocker: str = ""
    blocked: str = ""
    warning: str = ""
    errors: list[str] = field(default_factory=list)
    raw: str = ""


@dataclass(frozen=True)
class Review:
    """The operations, and whether the changeset is valid against the plan now."""

    operations: list[OperationRow]
    validated: bool
    valid: bool
    general_errors: list[str]


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


class _Reader:
    """Names items and refs readably: ``BAL-3 · Title``, and an item the changeset creates by its
    title, ``Login form (new ticket)``: a reader never meets the changeset's ``$login``."""

    def __init__(self, project: Project, operations: list[Any]) -> None:
        self.project = project
        self.refs = {
            f"${op['ref']}": (str(op.get("kind") or "item"), str(op["fields"].get("title", "")))
            for op in operations
            if isinstance(op, dict)
            and op.get("op") == "create"
            and isinstance(op.get("ref"), str)
            and isinstance(op.get("fields"), dict)
        }
        numbers = {n for key in _keys(operations) if (n := item_number(project, key)) is not None}
        items = Item.objects.filter(project=project, number__in=numbers).select_related(
            "project", "epic__project", "milestone__project"
        )
        self.items = {item.key: item for item in items}

    def name(self, value: Any) -> str:
        if isinstance(value, str) and value in self.items:
            return f"{value} · {self.items[value].title}"
        if isinstance(value, str) and value in self.refs:
            kind, title = self.refs[value]
            return f"{title or 'Untitled'} (new {kind})"
        if isinstance(value, str) and value:
            return f"{value} (unknown item)"
        return EMPTY if value is None else _json(value)

    def value(self, name: str, value: Any) -> str:
        if name in ("epic", "milestone"):
            return self.name(value)
        if value is None or value in ("", [], {}):
            return EMPTY
        if name == "acceptance_criteria" and isinstance(value, list):
            return "\n".join(f"• {c}" for c in value)
        if name == "labels" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            return ", ".join(value)
        if name == "state" and isinstance(value, str):
            return value.replace("_", " ")
        return value if isinstance(value, str) else _json(value)

    def current(self, item: Item, name: str) -> str:
        if name in ("epic", "milestone"):
            parent = getattr(item, name)
            return self.value(name, parent.key if parent is not None else None)
        return self.value(name, getattr(item, name, None))


def _keys(operations: list[Any]) -> set[str]:
    keys: set[str] = set()
    for op in operations:
        if not isinstance(op, dict):
            continue
        values = [op.get("item"), op.get("blocker"), op.get("blocked")]
        if isinstance(op.get("fields"), dict):
            values += [op["fields"].get("epic"), op["fields"].get("milestone")]
        keys.update(v for v in values if isinstance(v, str))
    return keys


def _fields(op: dict[str, Any]) -> dict[str, Any]:
    fields = op.get("fields")
    return fields if isinstance(fields, dict) else {}


def _ordered(fields: dict[str, Any]) -> list[str]:
    return [n for n in ITEM_FIELDS if n in fields] + sorted(n for n in fields if n not in ITEM_FIELDS)


def _create(row: OperationRow, op: dict[str, Any], reader: _Reader) -> None:
    kind = op.get("kind")
    # Named by its title in the fields below, never by its ref ($login): that is the
    # changeset's bookkeeping, not a name anyone uses.
    row.subject = f"new {kind}" if isinstance(kind, str) else "new item"
    fields = _fields(op)
    row.fields = [FieldRow(name=n, proposed=reader.value(n, fields[n])) for n in _ordered(fields)]
    if "state" not in fields and isinstance(op.get("kind"), str) and kind in DEFAULT_STATE:
        row.fields.append(FieldRow(name="state", proposed=f"{DEFAULT_STATE[kind]} (default)"))


def _update(row: OperationRow, op: dict[str, Any], reader: _Reader, proposed: bool) -> None:
    key = op.get("item")
    row.subject = reader.name(key)
    item = reader.items.get(key) if isinstance(key, str) else None
    fields = _fields(op)
    for name in _ordered(fields):
        after = reader.value(name, fields[name])
        before = reader.current(item, name) if item is not None else EMPTY
        row.fields.append(FieldRow(name=name, proposed=after, current=before, changed=before != after))
    base = op.get("base_version")
    if proposed and item is not None and base != item.version:
        row.warning = (
            f"{item.key} is at version {item.version}, but this update was written against version "
            f"{base}: applying will conflict."
        )


def _dependency(row: OperationRow, op: dict[str, Any], reader: _Reader) -> None:
    row.blocker = reader.name(op.get("blocker"))
    row.blocked = reader.name(op.get("blocked"))


def _row(index: int, op: Any, reader: _Reader, proposed: bool) -> OperationRow:
    kind = op.get("op") if isinstance(op, dict) else None
    if not isinstance(op, dict) or not isinstance(kind, str) or kind not in OP_LABELS:
        return OperationRow(index=index, op="unknown", label="Unreadable operation", raw=_json(op))
    row = OperationRow(index=index, op=kind, label=OP_LABELS[kind])
    if kind == "create":
        _create(row, op, reader)
    elif kind == "update":
        _update(row, op, reader, proposed)
    else:
        _dependency(row, op, reader)
    return row


def _validation_errors(project: Project, operations: Any, can_set_policy: bool) -> dict[str, list[str]]:
    """The field errors Apply would meet now, judged as one who may (or may not) set policy."""
    try:
        changeset_validate(
            project=project, operations=operations, can_set_policy=can_set_policy, check_versions=True
        )
    except ValidationError as exc:
        return exc.errors
    return {}


def operations_review(*, project: Project, operations: Any, can_set_policy: bool | None) -> Review:
    """Every operation of a changeset's ``operations`` readably; validated against the plan now
    as Apply would unless ``can_set_policy`` is None (a decided changeset is not judged again).

    It never raises on malformed operations: what it cannot read is an "Unreadable operation"
    row or a validation error.
    """
    operations = operations if isinstance(operations, list) else []
    validated = can_set_policy is not None
    reader = _Reader(project, operations)
    rows = [_row(index, op, reader, validated) for index, op in enumerate(operations)]
    errors = _validation_errors(project, operations, can_set_policy) if can_set_policy is not None else {}
    general: list[str] = []
    for path, messages in errors.items():
        match = _PATH.match(path)
        index = int(match.group(1)) if match else -1
        if 0 <= index < len(rows):
            where = match.group(2) if match and match.group(2) else "operation"
            rows[index].errors.extend(f"{where}: {message}" for message in messages)
        else:
            general.extend(f"{path}: {message}" for message in messages)
    return Review(
        operations=rows, validated=validated, valid=validated and not errors, general_errors=general
    )


def changeset_review(*, changeset: Changeset) -> Review:
    """Every operation of ``changeset`` readably, with validation for a proposed one (judged as
    its proposer, as Apply judges)."""
    proposed = changeset.status == ChangesetStatus.PROPOSED
    return operations_review(
        project=changeset.project,
        operations=changeset.operations,
        can_set_policy=proposer_can_set_policy(changeset) if proposed else None,
    )


def created_titles(operations: Any) -> dict[str, str]:
    """Each ref of a changeset's creates (``login``, without the ``$``) and the title it creates,
    so that what an applied changeset created is named by title, not by ref."""
    if not isinstance(operations, list):
        return {}
    return {
        op["ref"]: str(_fields(op).get("title") or "Untitled")
        for op in operations
        if isinstance(op, dict) and op.get("op") == "create" and isinstance(op.get("ref"), str)
    }
