"""``/projects/{key}/settings/``: where a project's owner changes its name, description, every
per-project setting, and its planner credential.

Owners only (``project.admin``, through the one permission check): 404 for whoever cannot read the
project, 403 for a reader who is no owner. Each setting shows its effective value and whether it is
the project's own or the deployment's default (``planner.web.settings_form``); the settings are
validated by the configuration's own fields and saved by ``project_update``, as over REST and in the
admin: one bad field, nothing saved. The credential is write-only: the form never shows it back, the
page says only whether one is set and which planner answers the project's chats
(docs/architecture.md#the-demo-planner). The two forms post to this page; ``section`` tells them apart.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from planner.domain.selectors import project_provider
from planner.web.settings_form import (
    SettingRow,
    SettingsInvalidError,
    grouped,
    setting_rows,
    submitted_settings,
)
from tracker.errors import ValidationError
from tracker.models import Project
from tracker.services.activity import Actor
from tracker.services.projects import project_update
from tracker.trust.permissions import PROJECT_ADMIN
from tracker.web.forms import credential_field
from tracker.web.page_helpers import page_project, page_user, with_csp

MAX_DESCRIPTION = 10_000


class CredentialForm(forms.Form):
    credential = credential_field(
        "The project's Anthropic API key (sk-ant-…). It is stored encrypted and never shown again."
    )
    remove = forms.BooleanField(required=False, label="Remove the stored credential")

    def clean(self) -> dict[str, object]:
        cleaned = super().clean() or {}
        if not cleaned.get("credential") and not cleaned.get("remove"):
            raise forms.ValidationError("Paste a credential, or tick “Remove the stored credential”.")
        return cleaned

    def change(self) -> str:
        """The new credential; "" removes it."""
        return "" if self.cleaned_data.get("remove") else str(self.cleaned_data["credential"])


class ProjectForm(forms.Form):
    """The project's name and description (``project_update`` checks them again)."""

    name = forms.CharField(max_length=200, label="Name")
    description = forms.CharField(
        max_length=MAX_DESCRIPTION, required=False, strip=False, widget=forms.Textarea, label="Description"
    )


@require_http_methods(["GET", "POST"])
@login_required
@with_csp
def project_settings(request: HttpRequest, key: str) -> HttpResponse:
    user = page_user(request)
    project = page_project(user, key, PROJECT_ADMIN)
    here = reverse("planner-project-settings", args=[project.key])
    posted = request.method == "POST"
    if posted and request.POST.get("section") == "settings":
        return _save_settings(request, project, here)
    form = CredentialForm(request.POST if posted else None)
    if form.is_valid():
        try:
            project_update(actor=Actor(user=user), project=project, credential=form.change())
        except ValidationError as exc:
            for errors in exc.errors.values():
                form.add_error(None, errors)
        else:
            done = "The credential was removed." if form.change() == "" else "The credential was saved."
            messages.success(request, done)
            return HttpResponseRedirect(here)
    return _page(request, project, credential_form=form, project_form=_project_form(project), rows=None)


def _project_form(project: Project) -> ProjectForm:
    return ProjectForm(initial={"name": project.name, "description": project.description})


def _save_settings(request: HttpRequest, project: Project, here: str) -> HttpResponse:
    """Name, description and every setting at once; any bad field shows its message, nothing saved."""
    project_form = ProjectForm(request.POST)
    current = project.settings if isinstance(project.settings, dict) else {}
    rows: list[SettingRow]
    try:
        overrides, rows = submitted_settings(request.POST, current)
    except SettingsInvalidError as exc:
        overrides, rows = None, exc.rows
    if project_form.is_valid() and overrides is not None:
        try:
            project_update(
                actor=Actor(user=page_user(request)),
                project=project,
                name=project_form.cleaned_data["name"],
                description=project_form.cleaned_data["description"],
                settings=overrides,
            )
        except ValidationError as exc:
            _place_errors(exc.errors, project_form, rows)
        else:
            messages.success(request, "The settings were saved.")
            return HttpResponseRedirect(here)
    project.refresh_from_db()  # a refused save changed nothing: show the name as stored
    return _page(request, project, credential_form=CredentialForm(), project_form=project_form, rows=rows)


def _place_errors(errors: dict[str, list[str]], form: ProjectForm, rows: list[SettingRow]) -> None:
    by_name = {row.spec.name: row for row in rows}
    for where, problems in errors.items():
        setting = where.removeprefix("settings.").split(".", 1)[0]
        if where in form.fields:
            form.add_error(where, problems)
        elif setting in by_name:
            by_name[setting].errors.extend(problems)
        else:
            form.add_error(None, problems)


def _page(
    request: HttpRequest,
    project: Project,
    *,
    credential_form: CredentialForm,
    project_form: ProjectForm,
    rows: list[SettingRow] | None,
) -> HttpResponse:
    if rows is None:
        rows = setting_rows(project.settings if isinstance(project.settings, dict) else {})
    invalid = bool(credential_form.errors or project_form.errors or any(row.errors for row in rows))
    context: dict[str, Any] = {
        "project": project,
        "form": credential_form,
        "project_form": project_form,
        "groups": grouped(rows),
        "settings_invalid": project_form.errors or any(row.errors for row in rows),
        "provider": project_provider(project),
    }
    return render(request, "planner/settings.html", context, status=400 if invalid else 200)
