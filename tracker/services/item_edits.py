"""A person's edits of one item, where they see it: the ticket page's forms and ``PATCH`` over REST.

Every edit is a changeset (docs/domain.md#direct-edits), so it goes through the same validation,
item versions, activity log and the planner's change notes as any other. Where the project's
``[tracker] direct_edits`` allows it and four eyes is off, its author applies it at once;
otherwise it stays proposed for review. An edit sends the version it read: a stale one changes
nothing (:class:`ConflictError` with the current version). State moves follow
:data:`tracker.operations.TRANSITIONS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from tracker.errors import ConflictError, ValidationError
from tracker.inputs import refuse_nul
from tracker.models import Changeset, ChangesetStatus, Item, Project
from tracker.operations import FIELD_NAMES, MAX_REFERENCE, allowed_moves
from tracker.selectors import project_planner_config, project_work_config
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_apply_own, changeset_propose
from tracker.trust.permissions import TRACKER_WRITE, require

MAX_BLOCKERS = 50
CHANGESET_TITLE = 200


@dataclass(frozen=True)
class EditOutcome:
    """The changeset an edit became, and whether it was applied (else it waits for review)."""

    changeset: Changeset
    applied: bool


def direct_edit_allowed(*, project: Project, fields: Sequence[str], dependencies: bool) -> bool:
    """Whether an edit of ``fields`` (and dependencies, if ``dependencies``) applies at once."""
    if project_planner_config(project).four_eyes:
        return False
    mode = project_work_config(project).direct_edits
    if mode == "all":
        return True
    return mode == "state" and list(fields) == ["state"] and not dependencies


def _blocker_keys(name: str, value: Any) -> list[str]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ValidationError({name: ["Expected a list of item keys, such as BAL-12."]})
    if len(value) > MAX_BLOCKERS:
        raise ValidationError({name: [f"At most {MAX_BLOCKERS} keys."]})
    keys = []
    for key in value:
        if not isinstance(key, str) or not key.strip() or len(key) > MAX_REFERENCE or key.startswith("$"):
            raise ValidationError({name: ["Expected a list of item keys, such as BAL-12."]})
        keys.append(key.strip().upper())
    return list(dict.fromkeys(keys))


def _check_version(item: Item, version: Any) -> Item:
    """The item as it is now; a ConflictError if ``version`` is not its version."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValidationError({"version": ["Expected the item's version as you read it (an integer ≥ 1)."]})
    current = Item.objects.select_related("project", "epic", "milestone").get(pk=item.pk)
    if current.version != version:
        raise ConflictError(
            f"{current.key} changed since you read it: you sent version {version}, it is now at version "
            f"{current.version}. Nothing was changed; reload it and edit again.",
            current={"version": current.version, "state": current.state, "title": current.title},
        )
    return current


def _same(item: Item, name: str, value: Any) -> bool:
    """Whether setting ``name`` to ``value`` would leave ``item`` as it is (so the edit omits it)."""
    if name in ("epic", "milestone"):
        parent = getattr(item, name)
        return (parent.key if parent else None) == (
            value.strip().upper() if isinstance(value, str) else value
        )
    if name == "labels" and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return sorted({v.strip().lower() for v in value}) == item.labels
    return bool(getattr(item, name) == value)


def _changed_fields(item: Item, fields: Any) -> dict[str, Any]:
    if not isinstance(fields, dict):
        raise ValidationError({"fields": ["Expected a JSON object."]})
    unknown = [name for name in fields if name not in FIELD_NAMES]
    if unknown:
        raise ValidationError({str(name): ["Unknown field."] for name in unknown})
    refuse_nul(**fields)
    changed = {name: value for name, value in fields.items() if not _same(item, name, value)}
    for parent in ("epic", "milestone"):
        if isinstance(changed.get(parent), str):
            changed[parent] = changed[parent].strip().upper() or None
    state = changed.get("state")
    if isinstance(state, str):
        moves = allowed_moves(item.kind, item.state)
        if state not in moves:
            allowed = ", ".join(moves) or "none"
            raise ValidationError(
                {
                    "state": [
                        f"{item.key} cannot move from {item.state} to {state}; it may move to: {allowed}."
                    ]
                }
            )
    return changed


def _title(item: Item, fields: dict[str, Any], added: list[str], removed: list[str]) -> str:
    parts = []
    if "state" in fields:
        parts.append(f"move to {fields['state']}")
    others = [name.replace("_", " ") for name in fields if name != "state"]
    if others:
        parts.append(f"edit {', '.join(others)}")
    if added:
        parts.append(f"add blocker {', '.join(added)}")
    if removed:
        parts.append(f"remove blocker {', '.join(removed)}")
    return f"{item.key}: {'; '.join(parts)}"[:CHANGESET_TITLE]


def _field_errors(errors: dict[str, list[str]], names: list[str]) -> dict[str, list[str]]:
    """The changeset's errors keyed by the edit's own fields (``operations[0].fields.title`` →
    ``title``; an operation of ``names[i]`` → that name)."""
    out: dict[str, list[str]] = {}
    for path, messages in errors.items():
        name = path
        if path.startswith("operations["):
            index_text, _, rest = path[len("operations[") :].partition("]")
            index = int(index_text) if index_text.isdigit() else -1
            field = rest.removeprefix(".fields.") if rest.startswith(".fields.") else ""
            if field:
                name = field
            elif rest in (".base_version", ".kind"):
                name = "version" if rest == ".base_version" else "kind"
            elif 0 <= index < len(names):
                name = names[index]
        out.setdefault(name, []).extend(messages)
    return out


def item_edit(
    *,
    actor: Actor,
    item: Item,
    version: Any,
    fields: Any = None,
    add_blockers: Any = (),
    remove_blockers: Any = (),
) -> EditOutcome:
    """Edit ``item`` at ``version``: change ``fields``, add and remove the blockers named by key.

    Applied at once by ``actor`` where the project allows (:func:`direct_edit_allowed`), else
    proposed for review. Needs tracker.write (``policy`` needs policy.set). Raises ValidationError
    with errors keyed by field (``title``, ``state``, ``add_blockers``...), ConflictError when
    ``version`` is stale; either way nothing is stored.
    """
    project = item.project
    require(actor.user, project, TRACKER_WRITE)
    added = _blocker_keys(
        "add_blockers", list(add_blockers) if isinstance(add_blockers, tuple) else add_blockers
    )
    removed = _blocker_keys(
        "remove_blockers", list(remove_blockers) if isinstance(remove_blockers, tuple) else remove_blockers
    )
    with transaction.atomic():
        current = _check_version(item, version)
        changed = _changed_fields(current, {} if fields is None else fields)
        if not (changed or added or removed):
            raise ValidationError({"non_field_errors": ["Nothing to change: the item already reads so."]})
        operations: list[dict[str, Any]] = []
        names: list[str] = []
        if changed:
            operations.append(
                {"op": "update", "item": current.key, "base_version": version, "fields": changed}
            )
            names.append("fields")
        for name, op, keys in (
            ("add_blockers", "add_dependency", added),
            ("remove_blockers", "remove_dependency", removed),
        ):
            operations += [{"op": op, "blocker": key, "blocked": current.key} for key in keys]
            names += [name] * len(keys)
        direct = direct_edit_allowed(
            project=project, fields=list(changed), dependencies=bool(added or removed)
        )
        return _propose(
            actor,
            project=project,
            title=_title(current, changed, added, removed),
            operations=operations,
            names=names,
            direct=direct,
        )


def _propose(
    actor: Actor,
    *,
    project: Project,
    title: str,
    operations: list[dict[str, Any]],
    names: list[str],
    direct: bool,
) -> EditOutcome:
    """Propose ``operations`` as ``actor``; apply them at once if ``direct``. Inside the caller's
    transaction: an apply that conflicts raises, and the proposal goes with it."""
    try:
        changeset = changeset_propose(actor=actor, project=project, title=title, operations=operations)
    except ValidationError as exc:
        raise ValidationError(_field_errors(exc.errors, names), "The edit is invalid.") from exc
    if not direct:
        return EditOutcome(changeset=changeset, applied=False)
    changeset = changeset_apply_own(actor=actor, changeset=changeset)
    if changeset.status != ChangesetStatus.APPLIED:
        raise ConflictError(f"The edit no longer applies: {changeset.conflict_reason} Nothing was changed.")
    return EditOutcome(changeset=changeset, applied=True)


def item_create_quick(
    *,
    actor: Actor,
    project: Project,
    title: Any,
    kind: str = "ticket",
    epic: str | None = None,
    milestone: str | None = None,
    priority: str | None = None,
) -> EditOutcome:
    """Create an item from a title (and optionally its epic, milestone, priority) as a changeset:
    applied at once where ``direct_edits`` is ``all`` and four eyes is off, else proposed.
    ``outcome.changeset.created_items["new"]`` is the new key once applied."""
    require(actor.user, project, TRACKER_WRITE)
    fields: dict[str, Any] = {"title": title.strip() if isinstance(title, str) else title}
    for name, value in (("epic", epic), ("milestone", milestone), ("priority", priority)):
        if value:
            fields[name] = value.strip().upper() if name != "priority" else value
    operations = [{"op": "create", "ref": "new", "kind": kind, "fields": fields}]
    label = fields["title"] if isinstance(fields["title"], str) else ""
    direct = direct_edit_allowed(project=project, fields=["create"], dependencies=False)
    with transaction.atomic():
        return _propose(
            actor,
            project=project,
            title=f"New {kind}: {label}"[:CHANGESET_TITLE],
            operations=operations,
            names=["fields"],
            direct=direct,
        )
