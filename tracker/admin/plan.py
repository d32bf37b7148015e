"""Admin of the plan: items (written through item_create/item_update) and dependencies.

In a project with ``four_eyes`` on, nobody changes the plan here, superusers included
(docs/trust.md#four-eyes): its items and dependencies are read-only, and every change goes through a
changeset that someone other than its proposer applies.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import RelatedOnlyFieldListFilter
from django.db.models import QuerySet
from django.http import HttpRequest

from tracker.admin.base import BalletAdmin, BalletForm, VersionedForm, actor_of, adopt
from tracker.errors import ValidationError
from tracker.models import STATES_BY_KIND, Dependency, Item, ItemKind, Project
from tracker.models.plan import MAX_LABELS, Priority
from tracker.operations import labels_checked
from tracker.selectors import project_planner_config, project_work_config
from tracker.services.changeset_validation import changeset_validate
from tracker.services.items import dependency_add, dependency_remove, item_create, item_update
from tracker.trust.permissions import (
    POLICY_SET,
    TRACKER_READ,
    TRACKER_WRITE,
    has_permission,
    project_ids_with,
)

ITEM_FORM_FIELDS = (
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
PARENT_KINDS: dict[str, tuple[str, ...]] = {
    "epic": (ItemKind.TICKET,),
    "milestone": (ItemKind.EPIC, ItemKind.TICKET),
}


class LinesField(forms.CharField):
    """A list of strings edited as one line each."""

    widget = forms.Textarea(attrs={"rows": 4})

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(str(v) for v in value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        text = super().to_python(value) or ""
        return [line.strip() for line in text.splitlines() if line.strip()]


FOUR_EYES_NOTE = (
    "{key} requires four eyes: its plan is read-only here. Propose a changeset; "
    "someone other than you applies it."
)


def four_eyes(project: Project) -> bool:
    return project_planner_config(project).four_eyes


def directly_writable_projects(user: Any) -> QuerySet[Project]:
    """Projects whose plan ``user`` may change in the admin: tracker.write, and no four eyes."""
    writable = Project.objects.filter(pk__in=project_ids_with(user, TRACKER_WRITE))
    return writable.exclude(pk__in=[project.pk for project in writable if four_eyes(project)])


def writable_items(user: Any) -> QuerySet[Item]:
    projects = directly_writable_projects(user)
    return Item.objects.filter(project__in=projects).select_related("project")


class ItemForm(VersionedForm):
    """An item's editable fields, checked as the services and changesets check them."""

    acceptance_criteria = LinesField(required=False, help_text="One criterion per line.")
    priority = forms.ChoiceField(choices=Priority.choices, required=False, initial=Priority.NORMAL)
    labels = forms.JSONField(
        required=False, help_text='A list of the project\'s labels ([tracker] labels), such as ["bug"].'
    )

    class Meta:
        model = Item
        fields = ("project", "kind", *ITEM_FORM_FIELDS)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limit("project", directly_writable_projects(self.user))
        items = writable_items(self.user)
        if self.instance.pk is not None:
            items = items.filter(project_id=self.instance.project_id)
        self.limit("epic", items.filter(kind=ItemKind.EPIC))
        self.limit("milestone", items.filter(kind=ItemKind.MILESTONE))

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        project = self.instance.project if self.instance.pk is not None else cleaned.get("project")
        kind = self.instance.kind if self.instance.pk is not None else cleaned.get("kind")
        if project is None or kind is None:
            return cleaned
        state = cleaned.get("state")
        if state is not None and state not in STATES_BY_KIND[kind]:
            self.add_error("state", f"A {kind}'s state is one of: {', '.join(STATES_BY_KIND[kind])}.")
        for parent, kinds in PARENT_KINDS.items():
            self._check_parent(parent, kinds, project, kind)
        if not cleaned.get("priority") and "priority" in self.fields:
            cleaned["priority"] = self.instance.priority if self.instance.pk is not None else Priority.NORMAL
        self._check_labels(project)
        self._check_policy(project)
        return cleaned

    def _check_labels(self, project: Project) -> None:
        """The project's label names, sorted and without repeats, as changesets store them."""
        if "labels" not in self.fields:
            return
        labels = self.cleaned_data.get("labels")
        if labels in (None, ""):
            self.cleaned_data["labels"] = []
            return
        if not isinstance(labels, list) or not all(isinstance(name, str) for name in labels):
            self.add_error("labels", 'Expected a list of label names, such as ["bug"].')
            return
        names, wrong = labels_checked(labels, project_work_config(project).labels)
        if len(names) > MAX_LABELS:
            self.add_error("labels", f"At most {MAX_LABELS} labels.")
        elif wrong:
            self.add_error("labels", wrong)
        else:
            self.cleaned_data["labels"] = names

    def _check_parent(self, name: str, kinds: tuple[str, ...], project: Project, kind: str) -> None:
        parent = self.cleaned_data.get(name)
        if parent is None:
            return
        if kind not in kinds:
            self.add_error(name, f"A {kind} has no {name}.")
        elif parent.project_id != project.pk:
            self.add_error(name, f"{parent.key} is not in project {project.key}.")

    def _check_policy(self, project: Project) -> None:
        if "policy" not in self.fields:
            return
        policy = self.cleaned_data.get("policy")
        if policy in (None, ""):
            self.cleaned_data["policy"] = {}
        elif not isinstance(policy, dict):
            self.add_error("policy", "Expected a JSON object.")
        elif policy and not has_permission(self.user, project, POLICY_SET):
            self.add_error("policy", f"Only a human with policy.set in {project.key} may set a policy.")


@admin.register(Item)
class ItemAdmin(BalletAdmin):
    """Milestones, epics and tickets; every save bumps the version and logs who did it."""

    form = ItemForm
    rules = {"view": TRACKER_READ, "add": TRACKER_WRITE, "change": TRACKER_WRITE, "delete": None}
    list_display = ("item_key", "title", "kind", "state", "priority", "epic", "milestone", "version")
    list_display_links = ("item_key", "title")
    list_filter = ("kind", "state", "priority", ("project", RelatedOnlyFieldListFilter))
    search_fields = ("title", "description")
    list_select_related = ("project", "epic__project", "milestone__project")

    @admin.display(description="key", ordering="number")
    def item_key(self, obj: Item) -> str:
        return obj.key

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and four_eyes(obj.project):
            return False
        return super().has_change_permission(request, obj)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> Any:
        item = self.get_object(request, object_id)
        if request.method == "GET" and item is not None and four_eyes(item.project):
            self.message_user(request, FOUR_EYES_NOTE.format(key=item.project.key), messages.INFO)
        return super().change_view(request, object_id, form_url, extra_context)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["project", "kind", *ITEM_FORM_FIELDS]
        shown = ["item_key", "project", "kind", *ITEM_FORM_FIELDS, "version", "created_at", "updated_at"]
        return [*shown, "version_read"] if self.has_change_permission(request, obj) else shown

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ()
        fixed = ("item_key", "project", "kind", "version", "created_at", "updated_at")
        return fixed if has_permission(request.user, obj.project_id, POLICY_SET) else (*fixed, "policy")

    def save_model(self, request: HttpRequest, obj: Item, form: Any, change: bool) -> None:
        fields = {name: form.cleaned_data[name] for name in ITEM_FORM_FIELDS if name in form.cleaned_data}
        if change:
            base_version = form.cleaned_data.get("version_read")
            saved = item_update(actor=actor_of(request), item=obj, fields=fields, base_version=base_version)
        else:
            saved = item_create(
                actor=actor_of(request),
                project=form.cleaned_data["project"],
                kind=form.cleaned_data["kind"],
                fields=fields,
            )
        adopt(obj, saved)


class DependencyForm(BalletForm):
    """A new dependency, checked like a changeset's add_dependency (same project, no cycle)."""

    class Meta:
        model = Dependency
        fields = ("blocker", "blocked")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limit("blocker", writable_items(self.user))
        self.limit("blocked", writable_items(self.user))

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        blocker, blocked = cleaned.get("blocker"), cleaned.get("blocked")
        if blocker is None or blocked is None:
            return cleaned
        if blocker.project_id != blocked.project_id:
            raise forms.ValidationError("Both items must be in the same project.")
        operation = {"op": "add_dependency", "blocker": blocker.key, "blocked": blocked.key}
        try:
            changeset_validate(project=blocked.project, operations=[operation], can_set_policy=False)
        except ValidationError as exc:
            raise forms.ValidationError(exc.messages) from exc
        return cleaned


@admin.register(Dependency)
class DependencyAdmin(BalletAdmin):
    """Add or remove "blocker → blocked"; a dependency has nothing else to change."""

    form = DependencyForm
    project_path = "blocked__project"
    rules = {"view": TRACKER_READ, "add": TRACKER_WRITE, "change": None, "delete": TRACKER_WRITE}
    list_display = ("__str__", "blocker_title", "blocked_title", "created_at")
    list_filter = (("blocked__project", RelatedOnlyFieldListFilter),)
    search_fields = ("blocker__title", "blocked__title")
    list_select_related = ("blocker__project", "blocked__project")

    @admin.display(description="blocker")
    def blocker_title(self, obj: Dependency) -> str:
        return obj.blocker.title

    @admin.display(description="blocked")
    def blocked_title(self, obj: Dependency) -> str:
        return obj.blocked.title

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and four_eyes(obj.blocked.project):
            return False
        return super().has_delete_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: Dependency, form: Any, change: bool) -> None:
        adopt(obj, dependency_add(actor=actor_of(request), blocker=obj.blocker, blocked=obj.blocked))

    def delete_model(self, request: HttpRequest, obj: Dependency) -> None:
        dependency_remove(actor=actor_of(request), blocker=obj.blocker, blocked=obj.blocked)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for dependency in queryset.select_related("blocker__project", "blocked__project"):
            self.delete_model(request, dependency)
