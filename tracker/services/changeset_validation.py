"""Validation of changeset operations against a project's current plan.

:func:`changeset_validate` checks the structure of the operations (the one
description of :mod:`tracker.operations`), then what needs the plan: the
references (item keys and ``$ref``s), kinds, states, versions, the ``policy``
rule and cycles; it returns the operations resolved to item ids. Errors are
keyed by field path, such as ``operations[2].fields.state``. It reads a bounded
number of rows: the items the operations name and the project's dependency edges.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tracker.errors import ValidationError
from tracker.models import STATES_BY_KIND, Dependency, Item, ItemKind, Project
from tracker.operations import FIELD_NAMES, OPERATION_KINDS, labels_checked, operations_errors
from tracker.selectors import item_number, project_work_config

ITEM_FIELDS = FIELD_NAMES
MAX_TITLE = 200
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
    """The checks that need the plan, on operations whose structure was checked: a key with a
    structural error (``structural``) is not checked again."""

    def __init__(
        self,
        *,
        project: Project,
        can_set_policy: bool,
        check_versions: bool,
        structural: dict[str, list[str]],
    ) -> None:
        self.project = project
        self.can_set_policy = can_set_policy
        self.check_versions = check_versions
        self.structural = structural
        self.errors = _Errors()
        for path, messages in structural.items():
            for message in messages:
                self.errors.add(path, message)
        self.nodes: dict[Node, NodeInfo] = {}
        self.by_number: dict[int, int] = {}
        self.edges: set[tuple[Node, Node]] = set()

    def sound(self, path: str) -> bool:
        return path not in self.structural

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

    def resolve(self, path: str, value: str) -> Node | None:
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
        for name in ITEM_FIELDS:
            if name in fields and self.sound(f"{path}.{name}"):
                clean[name] = getattr(self, f"_field_{name}")(f"{path}.{name}", kind, fields[name])
        return clean

    def _field_title(self, path: str, kind: str, value: str) -> str:
        return value.strip()

    def _field_description(self, path: str, kind: str, value: str) -> str:
        return value

    def _field_acceptance_criteria(self, path: str, kind: str, value: list[str]) -> list[str]:
        return [criterion.strip() for criterion in value]

    def _field_state(self, path: str, kind: str, value: str) -> str:
        states = STATES_BY_KIND.get(kind, ())
        if value not in states:
            self.errors.add(path, f"{_a(kind).capitalize()}'s state is one of: {', '.join(states)}.")
        return value

    def _parent(
        self, path: str, kind: str, value: str | None, parent_kind: str, allowed: tuple[str, ...]
    ) -> Node | None:
        if kind not in allowed:
            self.errors.add(path, f"{_a(kind).capitalize()} has no {parent_kind}.")
            return None
        if value is None:
            return None
        node = self.resolve(path, value)
        if node is not None and self.nodes[node].kind != parent_kind:
            self.errors.add(path, f"{value} is {_a(self.nodes[node].kind)}, not {_a(parent_kind)}.")
        return node

    def _field_epic(self, path: str, kind: str, value: str | None) -> Node | None:
        return self._parent(path, kind, value, ItemKind.EPIC, (ItemKind.TICKET,))

    def _field_milestone(self, path: str, kind: str, value: str | None) -> Node | None:
        return self._parent(path, kind, value, ItemKind.MILESTONE, (ItemKind.EPIC, ItemKind.TICKET))

    def _field_priority(self, path: str, kind: str, value: str) -> str:
        return value  # the schema allows only a Priority

    def _field_labels(self, path: str, kind: str, value: list[str]) -> list[str]:
        """The project's label names, sorted and without repeats; an unknown name is an error."""
        names, wrong = labels_checked(value, project_work_config(self.project).labels)
        if wrong:
            self.errors.add(path, wrong)
        return names

    def _field_policy(self, path: str, kind: str, value: dict[str, Any]) -> dict[str, Any]:
        if not self.can_set_policy:
            self.errors.add(path, "Only a human with policy.set may set an execution policy.")
        return value

    def create(self, index: int, op: dict[str, Any]) -> ResolvedOperation | None:
        path = f"operations[{index}]"
        kind, ref, fields = op.get("kind"), op.get("ref"), op.get("fields")
        if not isinstance(op.get("kind"), str) or kind not in STATES_BY_KIND or not isinstance(fields, dict):
            return None
        node: str | None = None
        if ref is not None and self.sound(f"{path}.ref"):
            if f"${ref}" in self.nodes:
                self.errors.add(f"{path}.ref", f"Ref {ref} is already used in this changeset.")
            else:
                node = f"${ref}"
        clean = self.check_fields(f"{path}.fields", kind, fields)
        clean.setdefault("state", DEFAULT_STATE[kind])
        if node is not None:
            self.nodes[node] = NodeInfo(kind=kind, key=node)
        return ResolvedOperation(index=index, op="create", kind=kind, ref=ref, fields=clean)

    def update(self, index: int, op: dict[str, Any]) -> ResolvedOperation | None:
        path = f"operations[{index}]"
        item_key, base_version, fields = op.get("item"), op.get("base_version"), op.get("fields")
        if not (self.sound(f"{path}.item") and isinstance(item_key, str)):
            return None
        if item_key.startswith("$"):
            self.errors.add(f"{path}.item", "Update an existing item; set a new item's fields in its create.")
            return None
        node = self.resolve(f"{path}.item", item_key)
        if node is None or not isinstance(node, int) or not isinstance(fields, dict):
            return None
        info = self.nodes[node]
        clean = self.check_fields(f"{path}.fields", info.kind, fields)
        version = None
        if self.sound(f"{path}.base_version") and isinstance(base_version, int | float):
            version = int(base_version)  # JSON Schema's integer 4.0 is 4
        if self.check_versions and version is not None and version != info.version:
            self.errors.add(
                f"{path}.base_version",
                f"{info.key} changed: base_version {version} is stale, it is now at version {info.version}.",
            )
        return ResolvedOperation(index=index, op="update", item=node, base_version=version, fields=clean)

    def dependency(self, index: int, op: dict[str, Any]) -> ResolvedOperation | None:
        path = f"operations[{index}]"
        if not (self.sound(f"{path}.blocker") and self.sound(f"{path}.blocked")):
            return None
        blocker = self.resolve(f"{path}.blocker", op["blocker"])
        blocked = self.resolve(f"{path}.blocked", op["blocked"])
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


def changeset_validate(
    *,
    project: Project,
    operations: Any,
    can_set_policy: bool,
    check_versions: bool = True,
) -> list[ResolvedOperation]:
    """Validate ``operations`` against the current plan; raise ValidationError with field paths."""
    structural = operations_errors(operations)
    if "operations" in structural:
        raise ValidationError(structural)
    validator = _Validator(
        project=project, can_set_policy=can_set_policy, check_versions=check_versions, structural=structural
    )
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
    path = f"operations[{index}]"
    if not (validator.sound(path) and validator.sound(f"{path}.op")):
        return None  # not an object, or no operation we know: nothing more to say about it
    kind = op["op"]
    if kind == "create":
        return validator.create(index, op)
    if kind == "update":
        return validator.update(index, op)
    return validator.dependency(index, op)
