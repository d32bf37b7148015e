"""Changeset operations, described once.

The four operations a changeset holds, the keys each takes and the item
fields they set are declared here as data (:data:`OPERATIONS`, :data:`FIELDS`).
From that one declaration come:

- :data:`OPERATIONS_SCHEMA`, the JSON Schema of a changeset's operations, which
  the planner's ``propose_changeset`` tool shows the model: self-contained (no
  ``$ref``), each operation a closed object told apart by ``op``;
- through :func:`openapi_dialect`, the same schemas in OpenAPI 3.0's dialect:
  the REST API's ``ChangesetOperation`` component and one per operation;
- :func:`operations_errors`, the structural check: the same schema run by
  ``jsonschema``, each failure said in words and keyed by its path, such as
  ``operations[2].fields.state``.

What needs the plan (which items exist, their kinds and versions, cycles, who
may set a policy) is checked in :mod:`tracker.services.changeset_validation`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema import ValidationError as SchemaError

from tracker.inputs import json_path
from tracker.models.plan import ALL_STATES, MAX_LABELS, ItemKind, Priority

JsonSchema = dict[str, Any]

MAX_OPERATIONS: Final = 200
MAX_TITLE: Final = 200
MAX_DESCRIPTION: Final = 20_000
MAX_CRITERIA: Final = 50
MAX_CRITERION: Final = 500
MAX_KEY: Final = 30  # a project key (10) + "-" + a number's digits
MAX_REFERENCE: Final = 60  # an item key, or "$" + a ref
MAX_LABEL: Final = 30  # as ``[tracker] labels`` allows (ballet/env.py)


def labels_checked(names: Sequence[str], allowed: Sequence[str]) -> tuple[list[str], str | None]:
    """``names`` as an item stores them (lowercase, sorted, each once), and what is wrong with them
    against the project's ``allowed`` labels (None: nothing). Changesets and the admin ask alike."""
    labels = sorted({name.strip().lower() for name in names})
    unknown = [name for name in labels if name not in allowed]
    if not unknown:
        return labels, None
    choices = ", ".join(allowed) if allowed else "none (the project has no labels)"
    return labels, f"Unknown label {', '.join(unknown)}; the project's labels are: {choices}."


# The whole string: in Python's re (which jsonschema uses) "$" also matches before a final "\n".
REF_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,49}$(?!\n)"
NOT_BLANK: Final = r"\S"
KIND_NAMES: Final = tuple(ItemKind.values)


@dataclass(frozen=True)
class Key:
    """A key of an operation, or a field it sets: the JSON Schema of its value and what to say when
    a value breaks it (``message``; ``limits`` by JSON Schema keyword where that says it better;
    ``missing`` when a required key is absent)."""

    name: str
    schema: JsonSchema
    message: str
    limits: Mapping[str, str] = field(default_factory=dict)
    missing: str | None = None


@dataclass(frozen=True)
class Operation:
    """One kind of operation: what it does (with an example), its keys besides ``op``, those it requires."""

    op: str
    summary: str
    keys: tuple[Key, ...]
    required: tuple[str, ...]


def _reference(what: str, *, nullable: bool = False) -> JsonSchema:
    kinds: str | list[str] = ["string", "null"] if nullable else "string"
    return {"type": kinds, "minLength": 1, "maxLength": MAX_REFERENCE, "description": what}


REFERENCE_MESSAGE = "Expected an item key, such as BAL-12, or a $ref of this changeset."

FIELDS: Final = (
    Key(
        "title",
        {"type": "string", "minLength": 1, "maxLength": MAX_TITLE, "pattern": NOT_BLANK},
        "Expected a non-empty string.",
        {"maxLength": f"At most {MAX_TITLE} characters."},
        missing="A new item needs a title.",
    ),
    Key(
        "description",
        {"type": "string", "maxLength": MAX_DESCRIPTION, "description": "Markdown."},
        "Expected a string.",
        {"maxLength": f"At most {MAX_DESCRIPTION} characters."},
    ),
    Key(
        "acceptance_criteria",
        {
            "type": "array",
            "maxItems": MAX_CRITERIA,
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_CRITERION, "pattern": NOT_BLANK},
        },
        "Expected a list of non-empty strings.",
        {
            "maxItems": f"At most {MAX_CRITERIA} criteria.",
            "maxLength": f"Each criterion is at most {MAX_CRITERION} characters.",
        },
    ),
    Key(
        "state",
        {
            "type": "string",
            "enum": list(ALL_STATES),
            "description": "Tickets: draft, ready, in_progress, in_review, done, cancelled; "
            "milestones and epics: open, done, cancelled.",
        },
        f"Expected one of: {', '.join(ALL_STATES)}.",
    ),
    Key(
        "epic",
        _reference(
            "The epic's key or $ref (tickets only); null takes the ticket out of its epic.", nullable=True
        ),
        f"{REFERENCE_MESSAGE[:-1]}, or null.",
    ),
    Key(
        "milestone",
        _reference("The milestone's key or $ref (epics and tickets); null removes it.", nullable=True),
        f"{REFERENCE_MESSAGE[:-1]}, or null.",
    ),
    Key(
        "priority",
        {
            "type": "string",
            "enum": list(Priority.values),
            "description": "How soon it matters; runnable tickets are listed by it, then by number.",
        },
        f"Expected one of: {', '.join(Priority.values)}.",
    ),
    Key(
        "labels",
        {
            "type": "array",
            "maxItems": MAX_LABELS,
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_LABEL},
            "description": "Names from the project's labels (its [tracker] labels); they replace the "
            "item's labels.",
        },
        "Expected a list of label names.",
        {
            "maxItems": f"At most {MAX_LABELS} labels.",
            "maxLength": f"A label is at most {MAX_LABEL} characters.",
        },
    ),
    Key(
        "policy",
        {
            "type": "object",
            "description": "The execution policy: only a human with policy.set sets it, never the planner.",
        },
        "Expected a JSON object.",
    ),
)
FIELD_NAMES: Final = tuple(key.name for key in FIELDS)

# The state moves a person makes on an item's page and through PATCH (tracker.services.item_edits),
# by kind and from-state; a changeset a human reviews may set any state of the kind.
TICKET_TRANSITIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "draft": ("ready", "cancelled"),
    "ready": ("draft", "in_progress", "cancelled"),
    "in_progress": ("ready", "in_review", "cancelled"),
    "in_review": ("done", "in_progress", "cancelled"),
    "done": ("ready",),
    "cancelled": ("draft", "ready"),
}
GROUP_TRANSITIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "open": ("done", "cancelled"),
    "done": ("open",),
    "cancelled": ("open",),
}
TRANSITIONS: Final[Mapping[str, Mapping[str, tuple[str, ...]]]] = {
    ItemKind.TICKET: TICKET_TRANSITIONS,
    ItemKind.EPIC: GROUP_TRANSITIONS,
    ItemKind.MILESTONE: GROUP_TRANSITIONS,
}


def allowed_moves(kind: str, state: str) -> tuple[str, ...]:
    """The states an item of ``kind`` in ``state`` may move to by a direct edit."""
    return TRANSITIONS.get(kind, {}).get(state, ())


FIELD_HINTS: Final = {"kind": "Unknown field 'kind': an item's kind is set by its create and never changes."}


def _fields(*, creating: bool) -> Key:
    schema: JsonSchema = {
        "type": "object",
        "properties": {key.name: key.schema for key in FIELDS},
        "additionalProperties": False,
    }
    if creating:
        schema |= {"required": ["title"], "description": "The new item's fields; title is required."}
        return Key("fields", schema, "Expected a JSON object.")
    schema |= {"minProperties": 1, "description": "The fields to change, at least one."}
    return Key("fields", schema, "Expected a non-empty JSON object.")


def _dependency(op: str, summary: str) -> Operation:
    return Operation(
        op,
        summary,
        (
            Key("blocker", _reference("The item that must be resolved first."), REFERENCE_MESSAGE),
            Key("blocked", _reference("The item that waits for it."), REFERENCE_MESSAGE),
        ),
        ("blocker", "blocked"),
    )


OPERATIONS: Final = (
    Operation(
        "create",
        'Create an item: {"op": "create", "ref": "login", "kind": "ticket", "fields": {"title": "..."}}. '
        "Later operations name it $login.",
        (
            Key(
                "ref",
                {
                    "type": "string",
                    "pattern": REF_PATTERN,
                    "description": "A name later operations use as $ref.",
                },
                "A ref is 1-50 letters, digits, '-' or '_'.",
            ),
            Key(
                "kind",
                {"type": "string", "enum": list(KIND_NAMES)},
                f"Expected one of: {', '.join(KIND_NAMES)}.",
            ),
            _fields(creating=True),
        ),
        ("kind", "fields"),
    ),
    Operation(
        "update",
        'Change an item at the version you read: {"op": "update", "item": "BAL-12", "base_version": 4, '
        '"fields": {"state": "ready"}}.',
        (
            Key(
                "item",
                {"type": "string", "minLength": 1, "maxLength": MAX_KEY, "description": "The item's key."},
                "Expected an item key, such as BAL-12.",
            ),
            Key(
                "base_version",
                {"type": "integer", "minimum": 1, "description": "The item's version as you read it."},
                "Expected the item version you read (an integer ≥ 1).",
            ),
            _fields(creating=False),
        ),
        ("item", "base_version", "fields"),
    ),
    _dependency(
        "add_dependency",
        'Make blocker block blocked: {"op": "add_dependency", "blocker": "$login", "blocked": "BAL-12"}.',
    ),
    _dependency(
        "remove_dependency",
        'Remove a dependency: {"op": "remove_dependency", "blocker": "BAL-7", "blocked": "BAL-12"}.',
    ),
)
OPERATION_KINDS: Final = tuple(operation.op for operation in OPERATIONS)
_BY_OP: Final = {operation.op: operation for operation in OPERATIONS}
LIST: Final = Key(
    "operations",
    {"type": "array", "minItems": 1, "maxItems": MAX_OPERATIONS},
    "Expected a non-empty list of operations.",
    {"maxItems": f"At most {MAX_OPERATIONS} operations."},
)


def operation_schema(operation: Operation) -> JsonSchema:
    """The JSON Schema of one kind of operation: a closed object whose ``op`` is its tag."""
    properties = {"op": {"type": "string", "enum": [operation.op]}}
    properties |= {key.name: key.schema for key in operation.keys}
    return {
        "type": "object",
        "description": operation.summary,
        "properties": properties,
        "required": ["op", *operation.required],
        "additionalProperties": False,
    }


OPERATION_SCHEMA: Final[JsonSchema] = {
    "description": "One operation, told apart by op: create, update, add_dependency or remove_dependency.",
    "anyOf": [operation_schema(operation) for operation in OPERATIONS],
}
OPERATIONS_SCHEMA: Final[JsonSchema] = {
    **LIST.schema,
    "description": "Ordered operations, applied all or nothing.",
    "items": OPERATION_SCHEMA,
}


def openapi_dialect(schema: JsonSchema) -> JsonSchema:
    """``schema`` in OpenAPI 3.0's dialect: a ``null`` type becomes ``nullable``."""
    converted = copy.deepcopy(schema)
    stack = [converted]
    while stack:
        node = stack.pop()
        kinds = node.get("type")
        if isinstance(kinds, list) and "null" in kinds:
            others = [kind for kind in kinds if kind != "null"]
            node["type"] = others[0] if len(others) == 1 else others
            node["nullable"] = True
        for value in node.values():
            if isinstance(value, dict):
                stack.append(value)
            elif isinstance(value, list):
                stack.extend(item for item in value if isinstance(item, dict))
    return converted


_LIST_VALIDATOR: Final = Draft202012Validator(LIST.schema)
_VALIDATORS: Final = {
    operation.op: Draft202012Validator(operation_schema(operation)) for operation in OPERATIONS
}


def operations_errors(operations: Any) -> dict[str, list[str]]:
    """The structural errors of ``operations``, by path (``operations[2].fields.state``); none if it
    matches :data:`OPERATIONS_SCHEMA`."""
    problems = [
        LIST.limits.get(str(error.validator), LIST.message)
        for error in _LIST_VALIDATOR.iter_errors(operations)
    ]
    if problems:
        return {"operations": list(dict.fromkeys(problems))}
    errors: dict[str, list[str]] = {}
    for index, operation in enumerate(operations):
        for path, message in operation_errors(operation):
            messages = errors.setdefault(json_path(["operations", index, *path]), [])
            if message not in messages:
                messages.append(message)
    return errors


Path = list[str]


def operation_errors(operation: Any) -> list[tuple[Path, str]]:
    """The structural errors of one operation: (the path below it, such as ``["fields", "state"]``,
    what to say)."""
    if not isinstance(operation, dict):
        return [([], "Expected a JSON object.")]
    op = operation.get("op")
    spec = _BY_OP.get(op) if isinstance(op, str) else None
    if spec is None:
        expected = ", ".join(OPERATION_KINDS)
        unknown = f"Unknown operation {op!r}; expected one of: {expected}." if "op" in operation else None
        return [(["op"], unknown or f"Expected one of: {expected}.")]
    return [said for error in _VALIDATORS[spec.op].iter_errors(operation) for said in _said(spec, error)]


def _said(spec: Operation, error: SchemaError) -> Iterator[tuple[Path, str]]:
    """Where ``error`` is (down to the key it concerns) and what to say about it."""
    path = [str(part) for part in error.absolute_path]
    instance: dict[str, Any] = error.instance if isinstance(error.instance, dict) else {}
    if error.validator == "additionalProperties":
        schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}
        for name in instance:
            if name not in schema.get("properties", {}):
                hint = FIELD_HINTS.get(name, f"Unknown field {name!r}.")
                yield [*path, name], hint if path else f"Unknown key {name!r} for {spec.op}."
        return
    if error.validator == "required":
        for name in error.validator_value if isinstance(error.validator_value, list) else ():
            if name not in instance:
                key = _key(spec, [*path, name])
                yield [*path, name], key.missing or key.message
        return
    depth = 2 if path[:1] == ["fields"] and len(path) > 1 else 1
    key = _key(spec, path[:depth])
    yield path[:depth], key.limits.get(str(error.validator), key.message)


def _key(spec: Operation, path: Sequence[str]) -> Key:
    """The key at ``path`` (an operation's key, or a field under ``fields``)."""
    keys = {key.name: key for key in spec.keys}
    if len(path) > 1:
        return {key.name: key for key in FIELDS}[path[1]]
    return keys[path[0]]
