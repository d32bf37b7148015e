"""Writes to the knowledge base: create and update entries, keeping every revision.

An update must send the version it read; a stale version is a
:class:`ConflictError` carrying the entry as it is now. Entries are always
attributed to the human, also when the planner writes them for that human.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.db import transaction
from django.db.models import Model

from knowledge.models import KnowledgeEntry, KnowledgeKind, KnowledgeRevision
from knowledge.selectors import knowledge_snapshot, knowledge_visible
from tracker.db.locks import locked as row_locked
from tracker.errors import ConflictError, NotFoundError, PermissionDeniedError, ValidationError
from tracker.inputs import NUL_MESSAGE, nul_paths
from tracker.models import Item, Project
from tracker.search.types import KNOWLEDGE
from tracker.services.activity import Actor, activity_record
from tracker.tasks import search_index_on_commit
from tracker.trust.permissions import (
    KNOWLEDGE_READ,
    KNOWLEDGE_WRITE,
    TRACKER_READ,
    Principal,
    has_organization_permission,
    has_permission,
    require,
)

MAX_TITLE = 200
MAX_BODY = 200_000


def _check_fields(fields: dict[str, Any], *, creating: bool) -> dict[str, list[str]]:
    # The admin's forms let a NUL through too; PostgreSQL stores none.
    errors: dict[str, list[str]] = {where: [NUL_MESSAGE] for where in nul_paths(fields)}
    if "kind" in fields and fields["kind"] not in KnowledgeKind.values:
        errors["kind"] = [f"Expected one of: {', '.join(KnowledgeKind.values)}."]
    if creating and "kind" not in fields:
        errors["kind"] = ["This field is required."]
    title = fields.get("title")
    if "title" in fields and (not isinstance(title, str) or not title.strip()):
        errors["title"] = ["Expected a non-empty string."]
    elif isinstance(title, str) and len(title) > MAX_TITLE:
        errors["title"] = [f"At most {MAX_TITLE} characters."]
    elif creating and "title" not in fields:
        errors["title"] = ["This field is required."]
    body = fields.get("body", "")
    if not isinstance(body, str):
        errors["body"] = ["Expected a string."]
    elif len(body) > MAX_BODY:
        errors["body"] = [f"At most {MAX_BODY} characters."]
    return errors


def _check_links(
    actor: Actor, projects: list[Project], items: list[Item], already_linked: frozenset[int] = frozenset()
) -> None:
    """Links to new projects need knowledge.write there; links the entry already has are kept."""
    if len({p.organization_id for p in projects}) > 1:
        raise ValidationError({"projects": ["Link projects of one organization only."]})
    for project in projects:
        if project.pk not in already_linked:
            require(actor.user, project, KNOWLEDGE_WRITE)
    project_ids = {p.pk for p in projects}
    for item in items:
        if item.project_id not in project_ids:
            raise ValidationError({"items": [f"{item.key} is not in a linked project."]})


def _revision(entry: KnowledgeEntry, actor: Actor) -> None:
    KnowledgeRevision.objects.create(
        entry=entry,
        version=entry.version,
        kind=entry.kind,
        title=entry.title,
        body=entry.body,
        editor=actor.user,
        actor=actor.label,
    )


@transaction.atomic
def knowledge_create(
    *,
    actor: Actor,
    kind: Any,
    title: Any,
    body: Any = "",
    projects: list[Project],
    items: list[Item] | None = None,
) -> KnowledgeEntry:
    """Write a new entry linked to ``projects`` (at least one) and ``items``."""
    items = items or []
    errors = _check_fields({"kind": kind, "title": title, "body": body}, creating=True)
    if not projects:
        errors["projects"] = ["Link the entry to at least one project."]
    if errors:
        raise ValidationError(errors)
    _check_links(actor, projects, items)
    entry = KnowledgeEntry.objects.create(
        organization_id=projects[0].organization_id,
        kind=kind,
        title=title.strip(),
        body=body,
        author=actor.user,
        last_editor=actor.user,
    )
    entry.projects.set(projects)
    entry.items.set(items)
    _revision(entry, actor)
    activity_record(
        actor=actor,
        organization_id=entry.organization_id,
        project=None,
        verb="knowledge.created",
        target=f"knowledge:{entry.pk}",
        data={"title": entry.title, "kind": entry.kind, "projects": [p.key for p in projects]},
    )
    search_index_on_commit(KNOWLEDGE, [entry.pk])
    return entry


def _relink(
    actor: Actor, entry: KnowledgeEntry, projects: list[Project] | None, items: list[Item] | None
) -> bool:
    """Replace the entry's links where given; True if they changed.

    Links the actor cannot read are neither shown to them nor theirs to drop:
    they are kept whatever the actor sends (docs/domain.md#knowledge).
    """
    if projects is None and items is None:
        return False
    current_projects = list(entry.projects.all())
    current_items = list(entry.items.select_related("project"))
    hidden_projects = [p for p in current_projects if not has_permission(actor.user, p, KNOWLEDGE_READ)]
    hidden_items = [i for i in current_items if not has_permission(actor.user, i.project_id, TRACKER_READ)]
    new_projects = _union(projects if projects is not None else current_projects, hidden_projects)
    if not new_projects:
        raise ValidationError({"projects": ["Link the entry to at least one project."]})
    if any(p.organization_id != entry.organization_id for p in new_projects):
        raise ValidationError({"projects": ["Link projects of the entry's organization only."]})
    new_items = _union(items if items is not None else current_items, hidden_items)
    _check_links(actor, new_projects, new_items, frozenset(p.pk for p in current_projects))
    if {p.pk for p in new_projects} == {p.pk for p in current_projects} and {i.pk for i in new_items} == {
        i.pk for i in current_items
    }:
        return False
    entry.projects.set(new_projects)
    entry.items.set(new_items)
    return True


_Linked = TypeVar("_Linked", bound=Model)


def _union(given: list[_Linked], kept: list[_Linked]) -> list[_Linked]:
    """``given`` and then the ``kept`` ones it lacks."""
    ids = {obj.pk for obj in given}
    return [*given, *(obj for obj in kept if obj.pk not in ids)]


def _can_edit(actor: Actor, entry: KnowledgeEntry) -> bool:
    return knowledge_editable(user=actor.user, entry=entry)


def knowledge_editable(*, user: Principal | None, entry: KnowledgeEntry) -> bool:
    """Whether ``user`` may edit ``entry`` (knowledge.write in a project it is linked to, or in its
    organization for an entry linked to none): the pages show the edit form only then."""
    linked = list(entry.projects.all())
    if linked:
        return any(has_permission(user, p, KNOWLEDGE_WRITE) for p in linked)
    return has_organization_permission(user, entry.organization_id, KNOWLEDGE_WRITE)


@transaction.atomic
def knowledge_update(
    *,
    actor: Actor,
    entry: KnowledgeEntry,
    version: Any,
    fields: dict[str, Any],
    projects: list[Project] | None = None,
    items: list[Item] | None = None,
) -> KnowledgeEntry:
    """Change ``fields`` (kind, title, body) and optionally the links, at ``version``."""
    locked = row_locked(KnowledgeEntry.objects.all()).get(pk=entry.pk)
    if not knowledge_visible(user=actor.user).filter(pk=locked.pk).exists():
        raise NotFoundError(f"Knowledge entry {locked.pk} not found.")
    if not _can_edit(actor, locked):
        raise PermissionDeniedError("You need knowledge.write in a project this entry is linked to.")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValidationError({"version": ["Send the version you read (an integer)."]})
    errors = _check_fields(fields, creating=False)
    unknown = set(fields) - {"kind", "title", "body"}
    errors.update({name: ["Unknown field."] for name in sorted(unknown)})
    if errors:
        raise ValidationError(errors)
    if version != locked.version:
        raise ConflictError(
            f"The entry changed: you sent version {version}, it is now at version {locked.version}.",
            current=knowledge_snapshot(locked),
        )
    links_changed = _relink(actor, locked, projects, items)
    cleaned = {k: (v.strip() if k == "title" else v) for k, v in fields.items()}
    fields = {k: v for k, v in cleaned.items() if getattr(locked, k) != v}
    if not fields and not links_changed:
        return locked  # nothing changed: no new version
    for name, value in fields.items():
        setattr(locked, name, value)
    locked.version += 1
    locked.last_editor = actor.user
    locked.save(update_fields=[*fields, "version", "last_editor", "updated_at"])
    _revision(locked, actor)
    activity_record(
        actor=actor,
        organization_id=locked.organization_id,
        project=None,
        verb="knowledge.updated",
        target=f"knowledge:{locked.pk}",
        data={
            "title": locked.title,
            "version": locked.version,
            "fields": sorted(fields),
            "projects": sorted(locked.projects.values_list("key", flat=True)),
        },
    )
    search_index_on_commit(KNOWLEDGE, [locked.pk])
    return locked
