"""Validation of changeset operations against a project's current plan.

:func:`changeset_validate` checks the schema, the references (item keys and
``$ref``s), kinds, states, the ``policy`` rule and cycles, and returns the
operations resolved to item ids. Errors are keyed by field path, such as
``operations[2].fields.state``. It reads a bounded number of rows: the items
the operations name and the project's dependency edges.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tracker.errors import ValidationError
from tracker.models import STATES_BY_KIND, Dependency, Item, ItemKind, Project
from tracker.selectors import item_number

OPERATION_KINDS = ("create", "update", "add_dependency", "remove_dependency")
ITEM_FIELDS = ("title", "description", "acceptance_criteria", "state", "epic", "milestone", "policy")
REF_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,49}")  # fullmatch: "$" would let "a\n" pass
MAX_OPERATIONS = 200
MAX_TITLE = 200
MAX_DESCRIPTION = 20_000
MAX_CRITERIA = 50
MAX_CRITERION = 500
MAX_RATIONALE = 10_000
DEFAULT_STATE = {ItemKind.TICKET: "draft", ItemKind.EPIC: "open", ItemKind.MILESTONE: "open"}

# A node of the plan being validated: an existing item's id, or "$ref" of a new one.
Node = int | str


@dataclass
class NodeInfo:
    kind: str
    key: str
    version: int | None = None  # None for items the changeset creates


@dataclass(frozen=True)
class ResolvedOperation:
    """One operation with its references resolved to nodes."""

    index: int
    op: str
    kind: str | None = None
    ref: str | None = None
    item: int | None = None
    base_version: int | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    blocker: Node | None = None
    blocked: Node | None = None


class _Errors:
    def __init__(self) -> None:
        self.by_path: dict[str, list[str]] = defaultdict(list)

    def add(self, path: str, message: str) -> None:
        self.by_path[path].append(message)

    def __bool__(self) -> bool:
        return bool(self.by_path)


def _a(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _referenced_numbers(project: Project, operations: Iterable[Any]) -> set[int]:
    numbers: set[int] = set()
    for op in operations:
        if not isinstance(op, dict):
            continue
        values = [op.get("item"), op.get("blocker"), op.get("blocked")]
        fields = op.get("fields")
        if isinstance(fields, dict):
            values += [fields.get("epic"), fields.get("milestone")]
        for value in values:
            if isinstance(value, str) and (number := item_number(project, value)):
                numbers.add(number)
    return numbers


class _Validator:
    def __init__(self, *, project: Project, can_set_policy: bool, check_versions: bool) -> None:
        self.project = project
        self.can_set_policy = can_set_policy
        self.check_versions = check_versions
        self.errors = _Errors()
        self.nodes: dict[Node, NodeInfo] = {}
        self.by_number: dict[int, int] = {}
        self.edges: set[tuple[Node, Node]] = set()

    def load(self, operations: list[Any]) -> None:
        numbers = _referenced_numbers(self.project, operations)
        rows = Item.objects.filter(project=self.project, number__in=numbers).values_list(
            "pk", "number", "kind", "version"
        )
        for pk, number, kind, version in rows:
            self.nodes[pk] = NodeInfo(kind=kind, key=f"{self.project.key}-{number}", version=version)
            self.by_number[number] = pk
        if any(isinstance(op, dict) and op.get("op") in OPERATION_KINDS[2:] for op in operations):
            self.edges = set(
                Dependency.objects.filter(blocked__project=self.project).values_list(
                    "blocker_id", "blocked_id"
                )
            )

    def resolve(self, path: str, value: Any) -> Node | None:
        if not isinstance(value, str) or not value:
            self.errors.add(
                path, f"Expected an item key such as {self.project.key}-1 or a $ref of this changeset."
            )
            return None
        if value.startswith("$"):
            if value in self.nodes:
                return value
            self.errors.add(path, f"Unknown $ref {value}: create it earlier in this changeset.")
            return None
        number = item_number(self.project, value)
        if number is None or number not in self.by_number:
            self.errors.add(path, f"Unknown item {value} in project {self.project.key}.")
            return None
        return self.by_number[number]

    def check_fields(self, path: str, kind: str, fields: dict[str, Any]) -> dict[str, Any]:
        clean: dict[str, Any] = {}
        for name in fields:
            if name not in ITEM_FIELDS:
                self.errors.add(f"{path}.{name}", f"Unknown field {name!r}.")
        for name in ITEM_FIELDS:
            if name in fields:
                clean[name] = getattr(self, f"_field_{name}")(f"{path}.{name}", kind, fields[name])
        return clean

    def _field_title(self, path: str, kind: str, value: Any) -> Any:
        if not isinstance(value, str) or not value.strip():
            self.errors.add(path, "Expected a non-empty string.")
        elif len(value) > MAX_TITLE:
            self.errors.add(path, f"At most {MAX_TITLE} characters.")
        return value.strip() if isinstance(value, str) else value

    def _field_description(self, path: str, kind: str, value: Any) -> Any:
        if not isinstance(value, str):
            self.errors.add(path, "Expected a string.")
        elif len(value) > MAX_DESCRIPTION:
            self.errors.add(path, f"At most {MAX_DESCRIPTION} characters.")
        return value

    def _field_acceptance_criteria(self, path: str, kind: str, value: Any) -> Any:
        if not isinstance(value, list) or not all(isinstance(c, str) and c.strip() for c in value):
            self.errors.add(path, "Expected a list of non-empty strings.")
        elif len(value) > MAX_CRITERIA:
            self.errors.add(path, f"At most {MAX_CRITERIA} criteria.")
        elif any(len(c) > MAX_CRITERION for c in value):
            self.errors.add(path, f"Each criterion is at most {MAX_CRITERION} characters.")
        else:
            return [c.strip() for c in value]
        return value

    def _field_state(self, path: str, kind: str, value: Any) -> Any:
        states = STATES_BY_KIND.get(kind, ())
        if value not in states:
            self.errors.add(path, f"{_a(kind).capitalize()}'s state is one of: {', '.join(states)}.")
        return value

    def _parent(self, path: str, kind: str, value: Any, parent_kind: str, allowed: tuple[str, ...]) -> Any:
        if kind not in allowed:
            self.errors.add(path, f"{_a(kind).capitalize()} has no {parent_kind}.")
            return None
        if value is None:
            return None
        node = self.resolve(path, value)
        if node is not None and self.nodes[node].kind != parent_kind:
            self.errors.add(path, f"{value} is {_a(self.nodes[node].kind)}, not {_a(parent_kind)}.")
        return node

    def _field_epic(self, path: str, kind: str, value: Any) -> Any:
        return self._parent(path, kind, value, ItemKind.EPIC, (ItemKind.TICKET,))

    def _field_milestone(self, path: str, kind: str, value: Any) -> Any:
        return self._parent(path, kind, value, ItemKind.MILESTONE, (ItemKind.EPIC, ItemKind.TICKET))

    def _field_policy(self, path: str, kind: str, value: Any) -> Any:
        if not self.can_set_policy:
            self.errors.add(path, "Only a human with policy.set may set an execution policy.")
        elif not isinstance(value, dict):
            self.errors.add(path, "Expected a JSON object.")
        return value

    def create(self, index: int, op: dict[str, Any]) -> ResolvedOperation | None:
        path = f"operations[{index}]"
        self._unknown_keys(path, op, {"op", "ref", "kind", "fields"})
        kind = op.get("kind")
        if kind not in STATES_BY_KIND:
            self.errors.add(f"{path}.kind", "Expected one of: milestone, epic, ticket.")
            return None
        ref = op.get("ref")
        node: str | None = None
        if ref is not None:
            if not isinstance(ref, str) or not REF_PATTERN.fullmatch(ref):
                self.errors.add(f"{path}.ref", "A ref is 1-50 letters, digits, '-' or '_'.")
            elif f"${ref}" in self.nodes:
                self.errors.add(f"{path}.ref", f"Ref {ref} is already used in this changeset.")
            else:
                node = f"${ref}"
        fields = op.get("fields")
        if not isinstance(fields, dict):
            self.errors.add(f"{path}.fields", "Expected a JSON object.")
            return None
        if "title" not in fields:
            self.errors.add(f"{path}.fields.title", "A new item needs a title.")
        clean = self.check_fields(f"{path}.fields", kind, fields)
        clean.setdefault("state", DEFAULT_STATE[kind])
        if node is not None:
            self.nodes[node] = NodeInfo(kind=kind, key=node)
        return ResolvedOperation(index=index, op="create", kind=kind, ref=ref, fields=clean)

    def update(self, index: int, op: dict[str, Any]) -> ResolvedOperation | None:
        path = f"operations[{index}]"
        self._unknown_keys(path, op, {"op", "item", "base_version", "fields"})
        item_key = op.get("item")
        if isinstance(item_key, str) and item_key.startswith("$"):
            self.errors.add(f"{path}.item", "Update an existing item; set a new item's fields in its create.")
            return None
        node = self.resolve(f"{path}.item", item_key)
        base_version = op.get("base_version")
        if not isinstance(base_version, int) or isinstance(base_version, bool) or base_version < 1:
            self.errors.add(f"{path}.base_version", "Expected the item version you read (an integer ≥ 1).")
            base_version = None
        fields = op.get("fields")
        if not isinstance(fields, dict) or not fields:
            self.errors.add(f"{path}.fields", "Expected a non-empty JSON object.")
            return None
        if node is None or not isinstance(node, int):
            return None
        info = self.nodes[node]
        if "kind" in fields:
            self.errors.add(f"{path}.fields.kind", "An item's kind cannot change.")
            fields = {k: v for k, v in fields.items() if k != "kind"}
        clean = self.check_fields(f"{path}.fields", info.kind, fields)
        if self.check_versions and base_version is not None and base_version != info.version:
            self.errors.add(
                f"{path}.base_version",
                f"{info.key} changed: base_version {base_version} is stale, "
                f"it is now at version {info.version}.",
            )
        return ResolvedOperation(index=index, op="update", item=node, base_version=base_version, fields=clean)

    def dependency(self, index: int, op: dict[str, Any]) -> ResolvedOperation | None:
        path = f"operations[{index}]"
        self._unknown_keys(path, op, {"op", "blocker", "blocked"})
        blocker = self.resolve(f"{path}.blocker", op.get("blocker"))
        blocked = self.resolve(f"{path}.blocked", op.get("blocked"))
        if blocker is None or blocked is None:
            return None
        edge = (blocker, blocked)
        names = f"{self.nodes[blocker].key} → {self.nodes[blocked].key}"
        if op["op"] == "remove_dependency":
            if edge not in self.edges:
                self.errors.add(path, f"There is no dependency {names} to remove.")
            self.edges.discard(edge)
        elif blocker == blocked:
            self.errors.add(f"{path}.blocked", "An item cannot block itself.")
        elif edge in self.edges:
            self.errors.add(path, f"The dependency {names} already exists.")
        elif self._reaches(blocked, blocker):
            self.errors.add(path, f"The dependency {names} would make a cycle.")
        else:
            self.edges.add(edge)
        return ResolvedOperation(index=index, op=op["op"], blocker=blocker, blocked=blocked)

    def _reaches(self, start: Node, goal: Node) -> bool:
        successors: dict[Node, list[Node]] = defaultdict(list)
        for blocker, blocked in self.edges:
            successors[blocker].append(blocked)
        seen, stack = {start}, [start]
        while stack:
            for nxt in successors[stack.pop()]:
                if nxt == goal:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return False

    def _unknown_keys(self, path: str, op: dict[str, Any], allowed: set[str]) -> None:
        for key in op:
            if key not in allowed:
                self.errors.add(f"{path}.{key}", f"Unknown key {key!r} for {op.get('op')}.")


def changeset_validate(
    *,
    project: Project,
    operations: Any,
    can_set_policy: bool,
    check_versions: bool = True,
) -> list[ResolvedOperation]:
    """Validate ``operations`` against the current plan; raise ValidationError with field paths."""
    if not isinstance(operations, list) or not operations:
        raise ValidationError({"operations": ["Expected a non-empty list of operations."]})
    if len(operations) > MAX_OPERATIONS:
        raise ValidationError({"operations": [f"At most {MAX_OPERATIONS} operations."]})
    validator = _Validator(project=project, can_set_policy=can_set_policy, check_versions=check_versions)
    validator.load(operations)
    resolved: list[ResolvedOperation] = []
    for index, op in enumerate(operations):
        result = _validate_one(validator, index, op)
        if result is not None:
            resolved.append(result)
    if validator.errors:
        raise ValidationError(dict(validator.errors.by_path), "The changeset is invalid.")
    return resolved


def _validate_one(validator: _Validator, index: int, op: Any) -> ResolvedOperation | None:
    if not isinstance(op, dict):
        validator.errors.add(f"operations[{index}]", "Expected a JSON object.")
        return None
    kind = op.get("op")
    if kind == "create":
        return validator.create(index, op)
    if kind == "update":
        return validator.update(index, op)
    if kind in ("add_dependency", "remove_dependency"):
        return validator.dependency(index, op)
    validator.errors.add(
        f"operations[{index}].op",
        f"Unknown operation {kind!r}; expected one of: {', '.join(OPERATION_KINDS)}.",
    )
    return None
