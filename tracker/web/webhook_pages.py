"""``/projects/{key}/webhooks/``: an owner's page of the project's webhooks (register one, enable,
disable, delete), and ``/projects/{key}/webhooks/{id}/``: one webhook's settings and deliveries,
each with its attempts (status code, duration, the first KB of the answer, the error), a button
to deliver it again and one to send a test ping (docs/events.md#webhooks).

Like the members page, it answers 404 to whoever cannot read the project and 403 to a reader who
is not an owner. A new webhook's answer shows its secret, this once (no-store, and a one-time
form value so that a reload makes no second webhook). Writes go through
``tracker.services.webhook_endpoints``.
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

from tracker.errors import BalletError, NotFoundError, ValidationError
from tracker.models import Project, Webhook, WebhookFormat
from tracker.services.activity import Actor
from tracker.services.events import EVENT_TYPES
from tracker.services.webhook_endpoints import (
    MAX_NAME,
    MAX_URL,
    delivery_redeliver,
    webhook_create,
    webhook_delete,
    webhook_ping,
    webhook_update,
)
from tracker.trust.permissions import PROJECT_ADMIN
from tracker.web.page_helpers import form_issued, form_used, no_store, page_project, page_user, with_csp
from tracker.webhook_selectors import MAX_LISTED, delivery_list, webhook_get, webhook_list


class WebhookForm(forms.Form):
    name = forms.CharField(max_length=MAX_NAME, help_text="Which receiver it is, such as “CI” or “#eng”.")
    url = forms.CharField(
        label="URL",
        max_length=MAX_URL,
        help_text="http:// or https://; Ballet posts each event there. Private addresses are refused.",
    )
    types = forms.MultipleChoiceField(
        label="Event types",
        choices=[(kind, kind) for kind in EVENT_TYPES],
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="None ticked: every type.",
    )
    format = forms.ChoiceField(
        choices=[
            (WebhookFormat.STANDARD, "Standard Webhooks: signed JSON"),
            (WebhookFormat.SLACK, "Slack: an incoming webhook's message"),
        ],
        initial=WebhookFormat.STANDARD,
    )


def _owned(request: HttpRequest, key: str) -> Project:
    return page_project(page_user(request), key, PROJECT_ADMIN)


def _hook(project: Project, webhook_id: int) -> Webhook:
    try:
        return webhook_get(project=project, webhook_id=webhook_id)
    except NotFoundError as exc:
        raise Http404(exc.message) from exc


def _to_list(project: Project) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("webhooks", args=[project.key]))


def _to_hook(project: Project, webhook_id: int) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("webhook", args=[project.key, webhook_id]))


def _told(request: HttpRequest, exc: BalletError) -> None:
    detail = exc.messages if isinstance(exc, ValidationError) else []
    messages.error(request, " ".join(detail) if detail else exc.message)


def _errors_placed(form: WebhookForm, exc: ValidationError) -> None:
    for field, errors in exc.errors.items():
        form.add_error(field if field in form.fields else None, errors)


def _list_page(
    request: HttpRequest,
    project: Project,
    *,
    form: WebhookForm | None = None,
    made: dict[str, Any] | None = None,
) -> HttpResponse:
    context = {
        "project": project,
        "webhooks": webhook_list(project=project),
        "form": form or WebhookForm(),
        "once": form_issued(request),
        "made": made,
    }
    status = 400 if form is not None and form.errors else 200
    return render(request, "tracker/webhooks.html", context, status=status)


@require_GET
@login_required
@with_csp
@no_store
def webhooks_page(request: HttpRequest, key: str) -> HttpResponse:
    """The project's webhooks and the form that registers one, for its owners."""
    return _list_page(request, _owned(request, key))


@require_POST
@login_required
@with_csp
@no_store
def webhook_create_page(request: HttpRequest, key: str) -> HttpResponse:
    """A new webhook: the answer shows its secret, this once."""
    project = _owned(request, key)
    if not form_used(request, request.POST.get("once", "")):
        messages.info(
            request,
            "That form was sent already; its secret was shown once. Delete the webhook if no one copied it.",
        )
        return _to_list(project)
    form = WebhookForm(request.POST)
    if not form.is_valid():
        return _list_page(request, project, form=form)
    try:
        hook, secret = webhook_create(
            actor=Actor(user=page_user(request)), project=project, **form.cleaned_data
        )
    except ValidationError as exc:
        _errors_placed(form, exc)
        return _list_page(request, project, form=form)
    return _list_page(request, project, made={"webhook": hook, "secret": secret})


@require_POST
@login_required
def webhook_enabled_page(request: HttpRequest, key: str, webhook_id: int) -> HttpResponse:
    """Enable or disable a webhook (``enabled``: 1 or 0)."""
    project = _owned(request, key)
    hook = _hook(project, webhook_id)
    enabled = request.POST.get("enabled") == "1"
    webhook_update(actor=Actor(user=page_user(request)), project=project, webhook_id=hook.pk, enabled=enabled)
    done = "enabled: new events go to it again" if enabled else "disabled: its pending deliveries failed"
    messages.success(request, f"The webhook “{hook.name}” is {done}.")
    return _to_list(project) if request.POST.get("back") == "list" else _to_hook(project, hook.pk)


@require_POST
@login_required
def webhook_delete_page(request: HttpRequest, key: str, webhook_id: int) -> HttpResponse:
    project = _owned(request, key)
    hook = _hook(project, webhook_id)
    webhook_delete(actor=Actor(user=page_user(request)), project=project, webhook_id=hook.pk)
    messages.success(request, f"Deleted the webhook “{hook.name}” and its deliveries.")
    return _to_list(project)


def _hook_page(
    request: HttpRequest, project: Project, hook: Webhook, *, form: WebhookForm | None = None
) -> HttpResponse:
    initial = {"name": hook.name, "url": hook.url, "types": hook.types, "format": hook.format}
    context = {
        "project": project,
        "webhook": hook,
        "form": form or WebhookForm(initial=initial),
        "deliveries": delivery_list(webhook=hook)[:MAX_LISTED],
        "listed": MAX_LISTED,
    }
    status = 400 if form is not None and form.errors else 200
    return render(request, "tracker/webhook.html", context, status=status)


@require_GET
@login_required
@with_csp
def webhook_page(request: HttpRequest, key: str, webhook_id: int) -> HttpResponse:
    """One webhook: its settings, and its newest deliveries with every attempt."""
    project = _owned(request, key)
    return _hook_page(request, project, _hook(project, webhook_id))


@require_POST
@login_required
@with_csp
def webhook_update_page(request: HttpRequest, key: str, webhook_id: int) -> HttpResponse:
    project = _owned(request, key)
    hook = _hook(project, webhook_id)
    form = WebhookForm(request.POST)
    if not form.is_valid():
        return _hook_page(request, project, hook, form=form)
    try:
        webhook_update(
            actor=Actor(user=page_user(request)), project=project, webhook_id=hook.pk, **form.cleaned_data
        )
    except ValidationError as exc:
        _errors_placed(form, exc)
        return _hook_page(request, project, hook, form=form)
    messages.success(request, f"The webhook “{form.cleaned_data['name'].strip()}” was saved.")
    return _to_hook(project, hook.pk)


@require_POST
@login_required
def webhook_ping_page(request: HttpRequest, key: str, webhook_id: int) -> HttpResponse:
    project = _owned(request, key)
    hook = _hook(project, webhook_id)
    try:
        webhook_ping(actor=Actor(user=page_user(request)), project=project, webhook_id=hook.pk)
    except BalletError as exc:
        _told(request, exc)
    else:
        messages.success(request, "A test ping is on its way: reload to see its attempt.")
    return _to_hook(project, hook.pk)


@require_POST
@login_required
def webhook_redeliver_page(request: HttpRequest, key: str, webhook_id: int, delivery_id: int) -> HttpResponse:
    project = _owned(request, key)
    hook = _hook(project, webhook_id)
    try:
        delivery = delivery_redeliver(
            actor=Actor(user=page_user(request)), project=project, webhook_id=hook.pk, delivery_id=delivery_id
        )
    except NotFoundError as exc:
        raise Http404(exc.message) from exc
    except BalletError as exc:
        _told(request, exc)
    else:
        messages.success(request, f"Delivery {delivery.msg_id} goes out again, with the same webhook-id.")
    return _to_hook(project, hook.pk)
