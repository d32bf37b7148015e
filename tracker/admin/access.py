"""Admin of organizations, projects (with the write-only credential) and memberships."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin import RelatedOnlyFieldListFilter
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpRequest

from tracker.admin.base import SUPERUSER, BalletAdmin, BalletForm, actor_of, adopt
from tracker.errors import ValidationError
from tracker.models import Membership, Organization, Project
from tracker.services.projects import (
    membership_remove,
    membership_set,
    project_settings_clean,
    project_update,
)
from tracker.trust.permissions import (
    PROJECT_ADMIN,
    TRACKER_READ,
    is_superuser,
    project_ids_with,
    visible_projects,
)
from tracker.web.forms import credential_field


@admin.register(Organization)
class OrganizationAdmin(BalletAdmin):
    """Visible to anyone who reads one of its projects; only superusers create or edit one."""

    project_path = None
    organization_path = "pk"
    rules = {"view": TRACKER_READ, "add": SUPERUSER, "change": SUPERUSER, "delete": SUPERUSER}
    list_display = ("name", "slug", "created_at")
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}


class ProjectForm(BalletForm):
    """Name, description and planner settings; the credential can be set or removed, never read."""

    credential = credential_field(
        "The project's LLM API key. Leave empty to keep the current one; it is never shown."
    )
    remove_credential = forms.BooleanField(required=False, help_text="Remove the stored credential.")

    class Meta:
        model = Project
        fields = ("organization", "key", "name", "description", "settings")

    def clean_settings(self) -> Any:
        value = self.cleaned_data.get("settings")
        try:
            return project_settings_clean({} if value is None else value)
        except ValidationError as exc:
            raise forms.ValidationError(exc.messages) from exc

    def credential_change(self) -> str | None:
        """The new credential, "" to remove it, None to keep it."""
        if self.cleaned_data.get("remove_credential"):
            return ""
        return self.cleaned_data.get("credential") or None


@admin.register(Project)
class ProjectAdmin(BalletAdmin):
    """Owners edit their project through ``project_update``; only superusers create or delete one."""

    form = ProjectForm
    project_path = "pk"
    rules = {"view": TRACKER_READ, "add": SUPERUSER, "change": PROJECT_ADMIN, "delete": SUPERUSER}
    list_display = ("key", "name", "organization", "has_credential", "created_at")
    list_filter = (("organization", RelatedOnlyFieldListFilter),)
    search_fields = ("key", "name")
    list_select_related = ("organization",)

    @admin.display(boolean=True, description="credential set")
    def has_credential(self, obj: Project) -> bool:
        return obj.has_credential

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        editable = ["name", "description", "settings"]
        if obj is None:
            return ["organization", "key", *editable, "credential"]
        if not self.has_change_permission(request, obj):
            return ["organization", "key", *editable, "has_credential", "created_at"]
        return ["organization", "key", *editable, "has_credential", "credential", "remove_credential"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("organization", "key", "has_credential", "created_at") if obj is not None else ()

    def save_model(self, request: HttpRequest, obj: Project, form: Any, change: bool) -> None:
        if not change:
            # No service creates projects: that is a superuser's act of setup.
            obj.save()
        # Not form.changed_data: it takes a JSON {} for an empty (hence changed) value.
        changed = {
            name: form.cleaned_data[name]
            for name in ("name", "description", "settings")
            if change and form.cleaned_data[name] != form.initial.get(name)
        }
        project_update(actor=actor_of(request), project=obj, credential=form.credential_change(), **changed)


class MembershipForm(BalletForm):
    """Add a member by username, or change a member's role."""

    username = forms.CharField(max_length=150)

    class Meta:
        model = Membership
        fields = ("project", "role")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            del self.fields["username"]
        self.limit(
            "project", visible_projects(self.user).filter(pk__in=project_ids_with(self.user, PROJECT_ADMIN))
        )

    def clean_username(self) -> str:
        username: str = self.cleaned_data["username"]
        if not User.objects.filter(username=username).exists():
            raise forms.ValidationError(f"No user named {username!r}.")
        return username

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        project, username = cleaned.get("project"), cleaned.get("username")
        if (
            project
            and username
            and Membership.objects.filter(project=project, user__username=username).exists()
        ):
            self.add_error("username", f"{username} is already a member of {project.key}; change their role.")
        elif project and username and not is_superuser(self.user):
            # Nobody joins a project without accepting (issue 41); an operator may add directly.
            self.add_error(
                "username",
                f"{username} joins {project.key} only by accepting an invitation: "
                f"invite them at /projects/{project.key}/members/.",
            )
        return cleaned


@admin.register(Membership)
class MembershipAdmin(BalletAdmin):
    """Owners manage their project's members through the membership services."""

    form = MembershipForm
    rules = {"view": TRACKER_READ, "add": PROJECT_ADMIN, "change": PROJECT_ADMIN, "delete": PROJECT_ADMIN}
    list_display = ("user", "project", "role", "created_at")
    list_filter = ("role", ("project", RelatedOnlyFieldListFilter))
    search_fields = ("user__username", "project__key")
    list_select_related = ("user", "project")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["project", "username", "role"] if obj is None else ["project", "user", "role", "created_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("project", "user", "created_at") if obj is not None else ()

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        username = obj.user.get_username() if change else form.cleaned_data["username"]
        saved = membership_set(
            actor=actor_of(request),
            project=obj.project,
            username=username,
            role=form.cleaned_data["role"],
            join=not change and is_superuser(request.user),  # the form refused anyone else's add
        )
        adopt(obj, saved)

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        membership_remove(actor=actor_of(request), project=obj.project, username=obj.user.get_username())

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for membership in queryset.select_related("project", "user"):
            self.delete_model(request, membership)
