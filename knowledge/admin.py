"""Admin of the knowledge base: entries written through the knowledge services, revisions read-only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin import RelatedOnlyFieldListFilter
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from knowledge.models import KnowledgeEntry, KnowledgeRevision
from knowledge.selectors import knowledge_visible
from knowledge.services import knowledge_create, knowledge_update
from tracker.admin.base import BalletAdmin, VersionedForm, actor_of, adopt
from tracker.models import Item, Project
from tracker.trust.permissions import KNOWLEDGE_READ, KNOWLEDGE_WRITE, has_permission, project_ids_with

CONTENT_FIELDS = ("kind", "title", "body")
LINK_FIELDS = ("projects", "items")


class KnowledgeEntryForm(VersionedForm):
    """Kind, title, body and links; an edit carries the version it read."""

    class Meta:
        model = KnowledgeEntry
        fields = (*CONTENT_FIELDS, *LINK_FIELDS)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        projects = Project.objects.filter(pk__in=project_ids_with(self.user, KNOWLEDGE_WRITE))
        if self.instance.pk is not None:
            # Keep the current links selectable even where the user cannot write, but only those the
            # user reads: a link to a project they cannot read is neither shown nor theirs to drop.
            linked = self.instance.projects.filter(pk__in=project_ids_with(self.user, KNOWLEDGE_READ))
            projects = Project.objects.filter(
                Q(pk__in=projects.values("pk")) | Q(pk__in=linked.values("pk")),
                organization_id=self.instance.organization_id,
            )
        items = Item.objects.filter(project__in=projects)
        self.limit("projects", projects.select_related("organization"))
        self.limit("items", items.select_related("project"))

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        projects = list(cleaned.get("projects") or [])
        if not projects:
            self.add_error("projects", "Link the entry to at least one project.")
            return cleaned
        if self.instance.pk is None or any(name in self.changed_data for name in LINK_FIELDS):
            self._check_links(projects, list(cleaned.get("items") or []))
        return cleaned

    def _check_links(self, projects: list[Project], items: list[Item]) -> None:
        if len({p.organization_id for p in projects}) > 1:
            self.add_error("projects", "Link projects of one organization only.")
        denied = [p.key for p in projects if not has_permission(self.user, p, KNOWLEDGE_WRITE)]
        if denied:
            self.add_error("projects", f"You need knowledge.write in {', '.join(denied)} to link it.")
        linked = {p.pk for p in projects}
        outside = [item.key for item in items if item.project_id not in linked]
        if outside:
            self.add_error("items", f"Not in a linked project: {', '.join(outside)}.")


@admin.register(KnowledgeEntry)
class KnowledgeEntryAdmin(BalletAdmin):
    """The entries the user may read (knowledge_visible); writes keep every revision."""

    form = KnowledgeEntryForm
    project_path = None
    organization_path = "organization"
    rules = {"view": KNOWLEDGE_READ, "add": KNOWLEDGE_WRITE, "change": KNOWLEDGE_WRITE, "delete": None}
    list_display = ("title", "kind", "organization", "version", "last_editor", "updated_at")
    list_filter = ("kind", ("organization", RelatedOnlyFieldListFilter))
    search_fields = ("title", "body")
    list_select_related = ("organization", "last_editor")
    filter_horizontal = LINK_FIELDS

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).filter(pk__in=knowledge_visible(user=request.user).values("pk"))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is None:
            return super().has_change_permission(request, obj)
        # As knowledge_update decides: a linked project where the user writes knowledge.
        linked = list(obj.projects.all())
        if linked:
            return any(has_permission(request.user, p, KNOWLEDGE_WRITE) for p in linked)
        return super().has_change_permission(request, obj)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return [*CONTENT_FIELDS, *LINK_FIELDS]
        shown = [
            *CONTENT_FIELDS,
            *LINK_FIELDS,
            "organization",
            "version",
            "author",
            "last_editor",
            "updated_at",
        ]
        return [*shown, "version_read"] if self.has_change_permission(request, obj) else shown

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("organization", "version", "author", "last_editor", "updated_at") if obj is not None else ()

    def save_model(self, request: HttpRequest, obj: KnowledgeEntry, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if not change:
            entry = knowledge_create(
                actor=actor_of(request),
                kind=data["kind"],
                title=data["title"],
                body=data["body"],
                projects=list(data["projects"]),
                items=list(data["items"]),
            )
            adopt(obj, entry)
            return
        relinked = any(name in form.changed_data for name in LINK_FIELDS)
        fields = {name: data[name] for name in CONTENT_FIELDS if name in form.changed_data}
        if not fields and not relinked:
            return
        entry = knowledge_update(
            actor=actor_of(request),
            entry=obj,
            version=data["version_read"],
            fields=fields,
            projects=list(data["projects"]) if relinked else None,
            items=list(data["items"]) if relinked else None,
        )
        adopt(obj, entry)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        """Nothing: the services set the links (the admin's save_m2m would bypass them)."""


@admin.register(KnowledgeRevision)
class KnowledgeRevisionAdmin(BalletAdmin):
    """Read-only history: one row per version of an entry."""

    project_path = None
    organization_path = "entry__organization"
    rules = {"view": KNOWLEDGE_READ, "add": None, "change": None, "delete": None}
    list_display = ("entry", "version", "kind", "title", "editor", "actor", "created_at")
    list_filter = ("kind",)
    search_fields = ("title", "body")
    list_select_related = ("entry", "editor")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        visible = knowledge_visible(user=request.user).values("pk")
        return super().get_queryset(request).filter(entry__in=visible).select_related("entry")
