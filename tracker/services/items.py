"""Writes to the plan: items and dependencies.

Changeset apply calls these; so does the admin, for a human's direct edits.
Each write bumps the item's version and appends an activity event.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F

from tracker.db.locks import locked as row_locked
from tracker.errors import ConflictError, ValidationError
from tracker.inputs import refuse_nul
from tracker.models import STATES_BY_KIND, Dependency, Item, Project
from tracker.search.types import ITEM
from tracker.services.activity import Actor, activity_record
from tracker.tasks import search_index_on_commit

EDITABLE_FIELDS = (
    "title",
    "description",
    "acceptance_criteria",
    "state",
    "epic",
    "milestone",
    "priority",
    "labels",
    "policy",
)


def _jsonable(name: str, value: Any) -> Any:
    if isinstance(value, Item):
        return value.key
    return value


def _allocate_number(project: Project) -> int:
    """The next item number, taken with an F() update so no stale copy of the counter matters."""
    Project.objects.filter(pk=project.pk).update(next_item_number=F("next_item_number") + 1)
    number = Project.objects.values_list("next_item_number", flat=True).get(pk=project.pk) - 1
    if Item.objects.filter(project_id=project.pk, number=number).exists():
        # A counter written back by older code can lag its items; say so instead of a constraint error.
        raise ConflictError(f"{project.key}-{number} already exists: the project's item counter is behind.")
    return number


@transaction.atomic
def item_create(*, actor: Actor, project: Project, kind: str, fields: dict[str, Any]) -> Item:
    """Create an item with validated ``fields`` (epic and milestone as Items)."""
    if kind not in STATES_BY_KIND:
        raise ValidationError({"kind": [f"Unknown kind {kind!r}."]})
    refuse_nul(**fields)  # the admin's JSON fields let a NUL through; PostgreSQL stores none
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise ValidationError({name: ["Unknown field."] for name in sorted(unknown)})
    item = Item(project=project, kind=kind, number=_allocate_number(project), **fields)
    if not item.state:
        item.state = STATES_BY_KIND[kind][0]
    item.save()
    activity_record(
        actor=actor,
        organization_id=project.organization_id,
        project=project,
        verb="item.created",
        target=item.key,
        data={"kind": kind, "title": item.title, "state": item.state},
    )
    search_index_on_commit(ITEM, [item.pk])
    return item


@transaction.atomic
def item_update(*, actor: Actor, item: Item, fields: dict[str, Any], base_version: int | None = None) -> Item:
    """Change ``fields`` of ``item``; a stale ``base_version`` is a conflict."""
    refuse_nul(**fields)
    locked = row_locked(Item.objects.select_related("project")).get(pk=item.pk)
    if base_version is not None and locked.version != base_version:
        raise ConflictError(
            f"{locked.key} changed: base_version {base_version} is stale, "
            f"it is now at version {locked.version}.",
            current={"version": locked.version},
        )
    changes: dict[str, list[Any]] = {}
    for name, value in fields.items():
        if name not in EDITABLE_FIELDS:
            raise ValidationError({name: ["Unknown field."]})
        before = getattr(locked, name)
        if before != value:
            changes[name] = [_jsonable(name, before), _jsonable(name, value)]
            setattr(locked, name, value)
    if not changes:
        return locked
    locked.version += 1
    locked.save(update_fields=[*changes, "version", "updated_at"])
    activity_record(
        actor=actor,
        organization_id=locked.project.organization_id,
        project=locked.project,
        verb="item.updated",
        target=locked.key,
        data={"changes": changes, "version": locked.version},
    )
    search_index_on_commit(ITEM, [locked.pk])
    return locked


@transaction.atomic
def dependency_add(*, actor: Actor, blocker: Item, blocked: Item) -> Dependency:
    dependency = Dependency.objects.create(blocker=blocker, blocked=blocked)
    activity_record(
        actor=actor,
        organization_id=blocked.project.organization_id,
        project=blocked.project,
        verb="dependency.added",
        target=blocked.key,
        data={"blocker": blocker.key, "blocked": blocked.key},
    )
    return dependency


@transaction.atomic
def dependency_remove(*, actor: Actor, blocker: Item, blocked: Item) -> None:
    deleted, _ = Dependency.objects.filter(blocker=blocker, blocked=blocked).delete()
    if not deleted:
        raise ConflictError(f"There is no dependency {blocker.key} → {blocked.key}.")
    activity_record(
        actor=actor,
        organization_id=blocked.project.organization_id,
        project=blocked.project,
        verb="dependency.removed",
        target=blocked.key,
        data={"blocker": blocker.key, "blocked": blocked.key},
    )
