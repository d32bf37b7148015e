"""``/projects/{key}/repositories/``: an owner's page of the project's linked Git repositories
(SPEC § 16): link one (an https or ssh URL with an optional credential, or a local path under
``[repositories] local_roots``), see how each mirror stands (last fetch, commit, size, why the
last fetch failed), fetch now, unlink.

Like the webhooks page, it answers 404 to whoever cannot read the project and 403 to a reader who
is not an owner. The credential is a password field, never shown again. Writes go through
``tracker.services.repositories``.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from tracker.errors import NotFoundError, ValidationError
from tracker.models import Project, Repository
from tracker.repos.selectors import repositories_of, repository_get
from tracker.services.activity import Actor
from tracker.services.repositories import (
    MAX_BRANCH,
    MAX_CREDENTIAL,
    MAX_NAME,
    MAX_PATH,
    MAX_URL,
    repository_fetch_request,
    repository_link,
    repository_unlink,
)
from tracker.trust.permissions import PROJECT_ADMIN
from tracker.web.page_helpers import no_store, page_project, page_user, with_csp


class RepositoryForm(forms.Form):
    name = forms.CharField(
        max_length=MAX_NAME, help_text="How the planner names it: lowercase, digits, - and _."
    )
    url = forms.CharField(
        label="URL",
        max_length=MAX_URL,
        required=False,
        help_text="https:// or ssh://, with no password in it. Or leave it empty and give a local path.",
    )
    local_path = forms.CharField(
        label="Local path",
        max_length=MAX_PATH,
        required=False,
        help_text="A folder on this server under [repositories] local_roots (off unless an operator set it).",
    )
    default_branch = forms.CharField(max_length=MAX_BRANCH, initial="main")
    credential = forms.CharField(
        max_length=MAX_CREDENTIAL,
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="For an https URL: a token, or USERNAME:PASSWORD. Kept encrypted, never shown again.",
    )


def _owned(request: HttpRequest, key: str) -> Project:
    return page_project(page_user(request), key, PROJECT_ADMIN)


def _repo(project: Project, repository_id: int) -> Repository:
    try:
        return repository_get(project=project, repository_id=repository_id)
    except NotFoundError as exc:
        raise Http404(exc.message) from exc


def _to_list(project: Project) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("repositories", args=[project.key]))


def _list_page(request: HttpRequest, project: Project, *, form: RepositoryForm | None = None) -> HttpResponse:
    context = {"project": project, "repositories": repositories_of(project), "form": form or RepositoryForm()}
    status = 400 if form is not None and form.errors else 200
    return render(request, "tracker/repositories.html", context, status=status)


@require_GET
@login_required
@with_csp
@no_store
def repositories_page(request: HttpRequest, key: str) -> HttpResponse:
    """The project's repositories with their mirrors' status, and the form that links one."""
    return _list_page(request, _owned(request, key))


def _given(cleaned: dict[str, Any]) -> dict[str, Any]:
    """The form's values as the service takes them: an empty optional field is not given."""
    given = {name: value for name, value in cleaned.items() if value != "" or name == "name"}
    given.setdefault("default_branch", "main")
    return given


@require_POST
@login_required
@with_csp
@no_store
def repository_link_page(request: HttpRequest, key: str) -> HttpResponse:
    project = _owned(request, key)
    form = RepositoryForm(request.POST)
    if not form.is_valid():
        return _list_page(request, project, form=form)
    try:
        repo = repository_link(
            actor=Actor(user=page_user(request)), project=project, **_given(form.cleaned_data)
        )
    except ValidationError as exc:
        for field, errors in exc.errors.items():
            form.add_error(field if field in form.fields else None, errors)
        return _list_page(request, project, form=form)
    messages.success(request, f"Linked “{repo.name}”: its first fetch is on its way.")
    return _to_list(project)


@require_POST
@login_required
def repository_fetch_page(request: HttpRequest, key: str, repository_id: int) -> HttpResponse:
    project = _owned(request, key)
    repo = _repo(project, repository_id)
    repository_fetch_request(actor=Actor(user=page_user(request)), project=project, repository_id=repo.pk)
    messages.success(request, f"A fetch of “{repo.name}” is on its way: reload to see how it went.")
    return _to_list(project)


@require_POST
@login_required
def repository_unlink_page(request: HttpRequest, key: str, repository_id: int) -> HttpResponse:
    project = _owned(request, key)
    repo = _repo(project, repository_id)
    repository_unlink(actor=Actor(user=page_user(request)), project=project, repository_id=repo.pk)
    messages.success(request, f"Unlinked “{repo.name}”; its mirror is removed.")
    return _to_list(project)
