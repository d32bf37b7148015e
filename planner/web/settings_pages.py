"""``/projects/{key}/settings/``: where a project's owner sets its planner credential.

Owners only (``project.admin``, through the one permission check): 404 for
whoever cannot read the project, 403 for a reader who is no owner. The
credential is write-only: the form never shows it back, the page says only
whether one is set and which planner answers the project's chats
(docs/architecture.md#the-demo-planner). The write is ``project_update``'s, as
over REST and in the admin.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from planner.domain.selectors import project_provider
from tracker.errors import ValidationError
from tracker.services.activity import Actor
from tracker.services.projects import project_update
from tracker.trust.permissions import PROJECT_ADMIN
from tracker.web.forms import credential_field
from tracker.web.page_helpers import page_project, page_user, with_csp


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


@require_http_methods(["GET", "POST"])
@login_required
@with_csp
def project_settings(request: HttpRequest, key: str) -> HttpResponse:
    user = page_user(request)
    project = page_project(user, key, PROJECT_ADMIN)
    form = CredentialForm(request.POST if request.method == "POST" else None)
    if form.is_valid():
        try:
            project_update(actor=Actor(user=user), project=project, credential=form.change())
        except ValidationError as exc:
            for errors in exc.errors.values():
                form.add_error(None, errors)
        else:
            done = "The credential was removed." if form.change() == "" else "The credential was saved."
            messages.success(request, done)
            return HttpResponseRedirect(reverse("planner-project-settings", args=[project.key]))
    context = {"project": project, "form": form, "provider": project_provider(project)}
    return render(request, "planner/settings.html", context, status=400 if form.errors else 200)
