"""What a planner tool is: its spec, the context it runs in, and how a call is run.

A call is validated against the tool's JSON Schema before anything runs, then
authorized with the one permission check for the tool context's reader (the
human the session speaks for, or in a shared sub-chat what all its readers may
do: ``planner/domain/selectors.py`` ``session_reader``), then handled in a savepoint.
Every failure becomes ``{"error": {"code", "message"}}``; one the handler did
not expect is ``internal_error`` (logged with its traceback, never shown to the
model), and the turn goes on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from jsonschema import Draft202012Validator
from jsonschema import ValidationError as SchemaError

from planner.agent.messages import ToolDefinition
from tracker.db.sql import Statement
from tracker.errors import BalletError, ConflictError, ValidationError
from tracker.inputs import NUL_MESSAGE, json_path, nul_paths
from tracker.models import Project
from tracker.services.activity import Actor
from tracker.trust.permissions import PLANNER_CHAT, Principal, Reader, has_permission

JsonObject = dict[str, Any]

logger = logging.getLogger(__name__)


@dataclass
class Draft:
    """Something a tool drafted for the human (a proposed changeset), sent as a ``draft`` frame."""

    kind: str
    snapshot: JsonObject
    artifact_id: str


@dataclass
class ToolContext:
    """Who a tool acts for, where, and what the session is following."""

    user: User
    project: Project
    session_id: uuid.UUID | None = None  # None: a call outside any planner session (MCP), as the user
    focus: set[str] = field(default_factory=set)
    drafts: list[Draft] = field(default_factory=list)
    question_id: int | None = None  # the question of a question's sub-chat (answer_question)
    # A question's sub-chat: the tools read and are authorized with what all its readers share,
    # never with the asker's access alone. What they write is still attributed to ``user``.
    shared: Reader | None = None

    @property
    def actor(self) -> Actor:
        return Actor(user=self.user, planner_session=self.session_id)

    @property
    def reader(self) -> Principal:
        """Whose access the tools read with and are authorized for."""
        return self.user if self.shared is None else self.shared

    def follow(self, *targets: str) -> None:
        self.focus.update(targets)


class ToolError(BalletError):
    """A tool refuses the call; the model sees ``code`` and ``message``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


Handler = Callable[[ToolContext, JsonObject], JsonObject]
Reads = Callable[[ToolContext, JsonObject], list[Statement]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: JsonObject
    permission: str
    handler: Handler
    # A tool that writes runs in a transaction of its own, so a failure leaves nothing half-written;
    # one that only reads needs none (on SQLite a transaction would take the write lock).
    writes: bool = False
    # A call waits for a human's answer (ask_human): the turn pauses instead of running it.
    asks_human: bool = False
    # A call starts a sub-chat (start_subchat): the turn pauses until the sub-chat ends.
    starts_subchat: bool = False
    # Who may approve a call when the project makes it wait for approval, in a question's sub-chat
    # (elsewhere the chat's owner): a member of the project with this permission.
    approver: str = PLANNER_CHAT
    # The statements a call with a valid input runs first, whatever they answer: a round of calls
    # reads them ahead, all at once (:func:`reads_ahead`). Only for a tool that reads alone.
    reads: Reads | None = None

    def definition(self) -> ToolDefinition:
        """What the model is shown: the schema without what only validation needs (model_schema)."""
        return ToolDefinition(
            name=self.name, description=self.description, input_schema=model_schema(self.input_schema)
        )

    def validator(self) -> Draft202012Validator:
        return _validator(self.input_schema)


# Bounds and patterns the validator enforces and whose breach the model is told in a readable
# error: the model calls right without reading them. ``maximum`` stays (a limit's upper bound).
VALIDATION_ONLY = frozenset(
    {"maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "minProperties", "minimum"}
)


def model_schema(schema: JsonObject) -> JsonObject:
    """``schema`` as the model is shown it, sent with every model call: without the keywords of
    :data:`VALIDATION_ONLY`, empty ``required`` lists, a ``type`` beside an ``enum``, and a property's
    description the schema already gave a property of the same name (the create and update
    operations of propose_changeset share their fields). Calls are validated with ``schema``."""
    seen: set[tuple[str, str]] = set()

    def lean(node: Any, name: str | None = None) -> Any:
        if isinstance(node, list):
            return [lean(child) for child in node]
        if not isinstance(node, dict):
            return node
        out: JsonObject = {}
        for key, value in node.items():
            if key in VALIDATION_ONLY or (key == "required" and value == []):
                continue
            if key == "type" and "enum" in node:  # the values say it
                continue
            if key == "description" and name is not None:
                if (name, value) in seen:
                    continue
                seen.add((name, value))
            if key == "properties":
                out[key] = {prop: lean(sub, prop) for prop, sub in value.items()}
            else:
                out[key] = lean(value)
        return out

    lean_schema: JsonObject = lean(schema)
    return lean_schema


# By schema, not by name: two specs of one name (the planner's list_runnable and MCP's, which pages
# by offset too) validate each by its own schema. The schema is kept, so its id is never reused.
_VALIDATORS: dict[int, tuple[JsonObject, Draft202012Validator]] = {}


def _validator(schema: JsonObject) -> Draft202012Validator:
    known = _VALIDATORS.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    _VALIDATORS[id(schema)] = (schema, validator)
    return validator


@dataclass(frozen=True)
class ToolOutcome:
    output: JsonObject
    is_error: bool

    @property
    def content(self) -> str:
        return json.dumps(self.output, ensure_ascii=False, default=str)


def error_output(code: str, message: str, **extra: Any) -> JsonObject:
    return {"error": {"code": code, "message": message, **extra}}


def _input_errors(spec: ToolSpec, arguments: Any) -> str | None:
    if not isinstance(arguments, dict):
        return "The input must be a JSON object."
    found = [leaf for error in spec.validator().iter_errors(arguments) for leaf in _meant(error)]
    errors = sorted(found, key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return None
    parts = []
    for error in errors[:5]:
        parts.append(f"{json_path(error.absolute_path) or 'input'}: {error.message}")
    return "; ".join(parts)


def _meant(error: SchemaError) -> list[SchemaError]:
    """The errors to report for ``error``: for a value that matches none of an ``anyOf``'s choices
    (a changeset operation), those of the choice it meant, the one whose tags (an ``enum`` of one
    value, such as ``op``) it has; else ``error`` itself."""
    if error.validator not in ("anyOf", "oneOf") or not error.context:
        return [error]
    by_choice: dict[Any, list[SchemaError]] = {}
    for sub in error.context:
        by_choice.setdefault(sub.relative_schema_path[0], []).append(sub)
    meant = [subs for subs in by_choice.values() if not any(_is_tag(sub) for sub in subs)]
    if len(meant) == 1:
        return [leaf for sub in meant[0] for leaf in _meant(sub)]
    tags = [sub for subs in by_choice.values() for sub in subs if _is_tag(sub)]
    if not meant and len(tags) == len(by_choice) and len({tuple(tag.absolute_path) for tag in tags}) == 1:
        # A tag no choice has (an unknown op): say which tags there are.
        values = [value for tag in tags for value in _tag_values(tag)]
        return [SchemaError(f"{tags[0].instance!r} is not one of {values}", path=tags[0].absolute_path)]
    return [error]


def _tag_values(error: SchemaError) -> list[Any]:
    value = error.validator_value
    return list(value) if isinstance(value, list) else [value]


def _is_tag(error: SchemaError) -> bool:
    value = error.validator_value
    return error.validator == "const" or (
        error.validator == "enum" and isinstance(value, list) and len(value) == 1
    )


def input_problem(spec: ToolSpec, arguments: Any) -> str | None:
    """What makes ``arguments`` no valid input of ``spec`` (its schema, a NUL anywhere), or None."""
    if refused := nul_paths(arguments):  # no NUL reaches the database (PostgreSQL stores none)
        return f"{', '.join(where or 'input' for where in refused)}: {NUL_MESSAGE}"
    return _input_errors(spec, arguments)


def run_tool(spec: ToolSpec | None, name: str, arguments: Any, context: ToolContext) -> ToolOutcome:
    """Validate, authorize and run one call; never raises for a domain failure."""
    if spec is None:
        return ToolOutcome(error_output("unknown_tool", f"There is no tool named {name!r}."), True)
    problem = input_problem(spec, arguments)
    if problem:
        return ToolOutcome(error_output("invalid_input", problem), True)
    if not has_permission(context.reader, context.project, spec.permission):
        return ToolOutcome(error_output("permission_denied", _denied(context, spec.permission)), True)
    drafts = len(context.drafts)
    try:
        with transaction.atomic() if spec.writes else contextlib.nullcontext():
            return ToolOutcome(spec.handler(context, arguments), False)
    except BalletError as exc:
        output = domain_error(exc)
    except Exception:  # the model gets a plain answer and the turn goes on; the log keeps the traceback
        logger.exception("Tool %s failed in session %s", name, context.session_id)
        message = (
            f"The tool {name} failed unexpectedly; the error was logged. Try another way or tell the user."
        )
        output = error_output("internal_error", message)
    del context.drafts[drafts:]  # nothing it drafted was kept
    return ToolOutcome(output, True)


def reads_ahead(spec: ToolSpec | None, arguments: Any, context: ToolContext) -> list[Statement]:
    """What a call of ``spec`` with ``arguments`` reads first, to be read ahead with the rest of its
    round (``tracker.db.sql.reading_ahead``); nothing for an input :func:`run_tool` refuses. Only the
    call's own code, once authorized, is ever given what was read."""
    if spec is None or spec.reads is None or spec.writes or input_problem(spec, arguments) is not None:
        return []
    return spec.reads(context, arguments)


def _denied(context: ToolContext, permission: str) -> str:
    key = context.project.key
    if context.shared is None:
        return f"{context.user.get_username()} lacks {permission} in {key}."
    users = context.shared.users
    lacking = [u.get_username() for u in users if not has_permission(u, context.project, permission)]
    return (
        f"{', '.join(lacking) or 'A reader of this chat'} lacks {permission} in {key}: in a question's "
        "sub-chat you may do only what the agent that asked and every human who answered you may do."
    )


def domain_error(exc: BalletError) -> JsonObject:
    """The error body of a refused call."""
    if isinstance(exc, ValidationError):
        return error_output("invalid", exc.message, fields=exc.errors)
    if isinstance(exc, ConflictError) and exc.current is not None:
        return error_output(exc.code, exc.message, current=exc.current)
    return error_output(exc.code, exc.message)
