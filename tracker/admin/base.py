"""What every Ballet ModelAdmin shares: our one permission check instead of Django's.

A staff user sees the rows of the projects they can read, and may add, change
or delete what their role in that project allows (:mod:`tracker.trust.permissions`),
never what Django's model permissions say. Writes go through services; a
domain error a service raises at save time becomes a message, not a 500.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Model, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict

from tracker.errors import BalletError, error_text
from tracker.models import Project
from tracker.services.activity import Actor
from tracker.trust.permissions import (
    TRACKER_READ,
    AnyUser,
    has_organization_permission,
    has_permission,
    is_superuser,
    project_ids_with,
)

Action = Literal["view", "add", "change", "delete"]
# A rule that only superusers pass: rows no role may create or remove (organizations, say).
SUPERUSER: Final = "superuser"


def acting_user(request: HttpRequest) -> User:
    """The logged-in human; the admin only lets authenticated staff in."""
    user = request.user
    assert isinstance(user, User)
    return user


def actor_of(request: HttpRequest) -> Actor:
    return Actor(user=acting_user(request))


def path_value(obj: Any, path: str) -> int | None:
    """The id at the end of a lookup path (``blocked__project`` → ``obj.blocked.project_id``)."""
    if path == "pk":
        return int(obj.pk) if obj.pk is not None else None
    *hops, last = path.split("__")
    for hop in hops:
        obj = getattr(obj, hop)
    value = getattr(obj, "pk" if last == "pk" else f"{last}_id")
    return int(value) if value is not None else None


def adopt(target: Model, saved: Model) -> None:
    """Copy what a service saved onto the instance the admin keeps using (logging, redirects)."""
    for field in saved._meta.concrete_fields:
        setattr(target, field.attname, getattr(saved, field.attname))
    target._state.adding = False


class BalletAdmin(admin.ModelAdmin):
    """Base of every Ballet ModelAdmin.

    ``project_path`` leads from a row to its project; ``organization_path`` to
    its organization, for rows that belong to an organization only (their
    project is null, or they have none). ``rules`` names the permission each
    action needs: None means nobody (the row is read-only in the admin),
    :data:`SUPERUSER` means superusers only.
    """

    project_path: ClassVar[str | None] = "project"
    organization_path: ClassVar[str | None] = None
    rules: ClassVar[Mapping[Action, str | None]] = {
        "view": TRACKER_READ,
        "add": None,
        "change": None,
        "delete": None,
    }

    # -- visibility ---------------------------------------------------------

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return self.visible_rows(request, super().get_queryset(request))

    def visible_rows(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """Only the rows of projects (and organizations) the user may view."""
        if is_superuser(request.user):
            return queryset
        ids = project_ids_with(request.user, self.rules["view"] or TRACKER_READ)
        condition = Q(pk__in=[])
        if self.project_path:
            condition |= Q(**{f"{self.project_path}__in": ids})
        if self.organization_path:
            organizations = Project.objects.filter(pk__in=ids).values("organization_id")
            org_condition = Q(**{f"{self.organization_path}__in": organizations})
            if self.project_path:
                org_condition &= Q(**{f"{self.project_path}__isnull": True})
            condition |= org_condition
        return queryset.filter(condition)

    def _get_obj_does_not_exist_redirect(self, request: HttpRequest, opts: Any, object_id: str) -> Any:
        # Django redirects with "doesn't exist"; Ballet answers 404, for hidden and missing rows alike.
        raise Http404(f"No {opts.verbose_name} with id {object_id}.")

    # -- permissions --------------------------------------------------------

    def allowed(self, request: HttpRequest, action: Action, obj: Any = None) -> bool:
        """The one check, for ``action`` on ``obj`` (None: on some row of this kind)."""
        permission = self.rules.get(action)
        user = request.user
        if permission is None:
            return False
        if permission == SUPERUSER:
            return is_superuser(user)
        if obj is None:  # a superuser holds every permission: no need to list the projects
            return is_superuser(user) or bool(project_ids_with(user, permission))
        project_id = path_value(obj, self.project_path) if self.project_path else None
        if project_id is not None:
            return has_permission(user, project_id, permission)
        organization_id = path_value(obj, self.organization_path) if self.organization_path else None
        if organization_id is None:
            return False
        return has_organization_permission(user, organization_id, permission)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.allowed(request, "view")

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.allowed(request, "view", obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.allowed(request, "add")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.allowed(request, "change", obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.allowed(request, "delete", obj)

    # -- forms and service errors -------------------------------------------

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        """The form class, told who is editing (forms limit choices and check rules by it)."""
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"user": request.user})

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        # Forms check what services check; what still fails (a race) rolls back and is told.
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except BalletError as exc:
            self.message_user(request, error_text(exc), messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        try:
            return super().delete_view(request, object_id, extra_context)
        except BalletError as exc:
            self.message_user(request, error_text(exc), messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())


class BalletForm(forms.ModelForm):
    """A model form that knows its user (set by :meth:`BalletAdmin.get_form`)."""

    user: ClassVar[AnyUser] = AnonymousUser()

    def limit(self, name: str, queryset: QuerySet[Any]) -> None:
        """Offer only ``queryset`` in the choice field ``name``, if the form has it."""
        field = self.fields.get(name)
        if isinstance(field, forms.ModelChoiceField):
            field.queryset = queryset


class VersionedForm(BalletForm):
    """A change form that carries the version it was read at; a stale save is refused.

    The user's edits stay in the re-rendered form, and its version moves to the
    current one, so saving again (after reading what changed) replaces it.
    """

    version_read = forms.IntegerField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            self.fields["version_read"].initial = self.instance.version

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        read = cleaned.get("version_read")
        current = self.instance.version if self.instance.pk is not None else None
        if current is not None and read is not None and read != current:
            if isinstance(self.data, QueryDict):
                data = self.data.copy()
                data[self.add_prefix("version_read")] = str(current)
                self.data = data
            raise forms.ValidationError(
                f"Someone changed this while you were editing: you read version {read}, it is now at "
                f"version {current}. Your edits are kept below. Check what changed (history), then "
                f"save again to replace version {current} with your text.",
                code="stale",
            )
        return cleaned
