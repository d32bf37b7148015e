"""Admin of skills (new versions through skill_version_create), their versions and pins."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin import RelatedOnlyFieldListFilter
from django.db.models import Max, Q, QuerySet
from django.http import HttpRequest

from tracker.admin.base import BalletAdmin, BalletForm, actor_of, adopt
from tracker.models import Project, Skill, SkillPin, SkillVersion
from tracker.services.skills import (
    MAX_BODY,
    NAME_PATTERN,
    skill_organization_writable,
    skill_pin_set,
    skill_version_create,
)
from tracker.trust.permissions import SKILL_READ, SKILL_WRITE, project_ids_with


def skill_writable_projects(user: Any) -> QuerySet[Project]:
    return Project.objects.filter(pk__in=project_ids_with(user, SKILL_WRITE)).select_related("organization")


class SkillAddForm(BalletForm):
    """A new skill at version 1, written from one of the user's projects."""

    write_from = forms.ModelChoiceField(
        queryset=Project.objects.none(),
        label="Project",
        help_text="A project skill belongs to it; an organization skill to its organization.",
    )
    skill_name = forms.RegexField(
        regex=NAME_PATTERN, label="Name", help_text="A slug: lowercase letters, digits and '-'."
    )
    organization_scope = forms.BooleanField(required=False, help_text="Share it with the whole organization.")
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 20}), max_length=MAX_BODY, label="SKILL.md")

    class Meta:
        model = Skill
        fields: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limit("write_from", skill_writable_projects(self.user))

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        project, name = cleaned.get("write_from"), cleaned.get("skill_name")
        if project is None or name is None:
            return cleaned
        same = Skill.objects.filter(name=name)
        if cleaned.get("organization_scope") and not skill_organization_writable(
            user=self.user, organization_id=project.organization_id
        ):
            self.add_error(
                "organization_scope",
                "You need skill.write in every project of the organization to write an organization skill.",
            )
        if cleaned.get("organization_scope"):
            same = same.filter(organization_id=project.organization_id, project__isnull=True)
        else:
            same = same.filter(project=project)
        if same.exists():
            self.add_error("skill_name", f"Skill {name} already exists there; add a version on its page.")
        return cleaned


class SkillChangeForm(BalletForm):
    """Adds a version: the text saved here becomes the skill's next version."""

    new_version = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 20}),
        max_length=MAX_BODY,
        required=False,
        label="New version",
        help_text="SKILL.md of the next version; leave empty to change nothing.",
    )

    class Meta:
        model = Skill
        fields: tuple[str, ...] = ()


class SkillVersionInline(admin.TabularInline):
    """The versions of a skill, newest first, read-only."""

    model = SkillVersion
    fields = ("version", "author", "created_at", "body")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return True  # the parent admin decided who sees the skill

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Skill)
class SkillAdmin(BalletAdmin):
    """Skills of a project or an organization; each save with text adds a version."""

    organization_path = "organization"
    rules = {"view": SKILL_READ, "add": SKILL_WRITE, "change": SKILL_WRITE, "delete": None}
    list_display = ("name", "scope", "organization", "project", "latest_version", "created_at")
    list_filter = (("organization", RelatedOnlyFieldListFilter), ("project", RelatedOnlyFieldListFilter))
    search_fields = ("name",)
    list_select_related = ("organization", "project")
    inlines = (SkillVersionInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).annotate(latest=Max("versions__version"))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.project_id is None:
            # An organization skill reaches every project's planner (docs/domain.md#skills).
            return skill_organization_writable(user=request.user, organization_id=obj.organization_id)
        return super().has_change_permission(request, obj)

    @admin.display(description="latest version", ordering="latest")
    def latest_version(self, obj: Skill) -> int | None:
        return getattr(obj, "latest", None)

    def get_inlines(self, request: HttpRequest, obj: Any) -> Any:
        return self.inlines if obj is not None else ()

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        kwargs["form"] = SkillAddForm if obj is None else SkillChangeForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["write_from", "skill_name", "organization_scope", "body"]
        shown = ["name", "scope", "organization", "project", "created_at"]
        return [*shown, "new_version"] if self.has_change_permission(request, obj) else shown

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("name", "scope", "organization", "project", "created_at") if obj is not None else ()

    def save_model(self, request: HttpRequest, obj: Skill, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if not change:
            version = skill_version_create(
                actor=actor_of(request),
                project=data["write_from"],
                name=data["skill_name"],
                body=data["body"],
                organization_scope=bool(data["organization_scope"]),
            )
            adopt(obj, version.skill)
        elif data.get("new_version", "").strip():
            skill_version_create(
                actor=actor_of(request),
                project=obj.project or self._org_project(request, obj),
                name=obj.name,
                body=data["new_version"],
                organization_scope=obj.project_id is None,
            )

    def _org_project(self, request: HttpRequest, skill: Skill) -> Project:
        """A project of the skill's organization from which the user may write it."""
        project = skill_writable_projects(request.user).filter(organization_id=skill.organization_id).first()
        assert project is not None, "the change permission needs skill.write in the organization"
        return project


@admin.register(SkillVersion)
class SkillVersionAdmin(BalletAdmin):
    """Read-only: versions are added on their skill's page."""

    project_path = "skill__project"
    organization_path = "skill__organization"
    rules = {"view": SKILL_READ, "add": None, "change": None, "delete": None}
    list_display = ("skill", "version", "author", "created_at")
    list_filter = (("skill__organization", RelatedOnlyFieldListFilter),)
    search_fields = ("skill__name", "body")
    list_select_related = ("skill", "author")


class SkillPinForm(BalletForm):
    """Pin a project to a version of one of its skills or its organization's."""

    class Meta:
        model = SkillPin
        fields = ("project", "skill", "version")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        projects = skill_writable_projects(self.user)
        self.limit("project", projects)
        org_ids = projects.values("organization_id")
        self.limit(
            "skill",
            Skill.objects.filter(
                Q(project__in=projects) | Q(project__isnull=True, organization_id__in=org_ids)
            ),
        )

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        project = self.instance.project if self.instance.pk is not None else cleaned.get("project")
        skill = self.instance.skill if self.instance.pk is not None else cleaned.get("skill")
        version = cleaned.get("version")
        if project is None or skill is None or version is None:
            return cleaned
        if skill.project_id not in (None, project.pk) or skill.organization_id != project.organization_id:
            self.add_error("skill", f"Skill {skill.name} is not one of {project.key}'s skills.")
        elif not skill.versions.filter(version=version).exists():
            self.add_error("version", f"Skill {skill.name} has no version {version}.")
        return cleaned


@admin.register(SkillPin)
class SkillPinAdmin(BalletAdmin):
    """Pins are set and removed through skill_pin_set."""

    form = SkillPinForm
    rules = {"view": SKILL_READ, "add": SKILL_WRITE, "change": SKILL_WRITE, "delete": SKILL_WRITE}
    list_display = ("project", "skill", "version")
    list_filter = (("project", RelatedOnlyFieldListFilter),)
    search_fields = ("skill__name", "project__key")
    list_select_related = ("project", "skill")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("project", "skill") if obj is not None else ()

    def save_model(self, request: HttpRequest, obj: SkillPin, form: Any, change: bool) -> None:
        skill_pin_set(actor=actor_of(request), project=obj.project, skill=obj.skill, version=obj.version)
        adopt(obj, SkillPin.objects.get(project=obj.project, skill=obj.skill))

    def delete_model(self, request: HttpRequest, obj: SkillPin) -> None:
        skill_pin_set(actor=actor_of(request), project=obj.project, skill=obj.skill, version=None)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for pin in queryset.select_related("project", "skill"):
            self.delete_model(request, pin)
