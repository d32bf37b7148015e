"""People's e-mail settings (docs/events.md#people): ``/notifications/`` for the signed-in user, each
kind at once, in the daily digest or off; and ``/notifications/unsubscribe/{token}/``, the link every
mail carries, which needs no sign-in: its signature is the authority (``tracker/mail.py``).

A GET of the unsubscribe link only asks (a mail scanner that follows links unsubscribes no one);
its button, or a mail client's one-click POST (RFC 8058, ``List-Unsubscribe=One-Click``, no CSRF
token: the token in the address is the proof), turns the kind off.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from tracker.mail import DIGEST, KIND_WORDS, Unsubscribe, unsubscribe_read
from tracker.models import NotifyKind, NotifyMode
from tracker.services.notifications import notify_modes, notify_modes_set
from tracker.web.page_helpers import page_user, with_csp

MODE_CHOICES = [
    (NotifyMode.NOW.value, "E-mail at once"),
    (NotifyMode.DIGEST.value, "In the daily digest"),
    (NotifyMode.OFF.value, "No e-mail"),
]


def _label(kind: str) -> str:
    words = KIND_WORDS[kind]
    return words[0].upper() + words[1:]


class NotifyForm(forms.Form):
    """One choice of mode per kind."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for kind in NotifyKind.values:
            self.fields[kind] = forms.ChoiceField(
                label=_label(kind), choices=MODE_CHOICES, widget=forms.RadioSelect
            )


@require_http_methods(["GET", "POST"])
@login_required
@with_csp
def notify_settings_page(request: HttpRequest) -> HttpResponse:
    """``/notifications/``: the form, saved with a message; a bad choice is shown, nothing saved."""
    user = page_user(request)
    if request.method == "POST":
        form = NotifyForm(request.POST)
        if form.is_valid():
            notify_modes_set(user=user, modes=form.cleaned_data)
            messages.success(request, "Your e-mail settings were saved.")
            return HttpResponseRedirect(reverse("notify-settings"))
        return _settings(request, form, status=400)
    return _settings(request, NotifyForm(initial=notify_modes(user=user)))


def _settings(request: HttpRequest, form: NotifyForm, status: int = 200) -> HttpResponse:
    response = render(request, "tracker/notifications.html", {"form": form}, status=status)
    response["Cache-Control"] = "private, no-store"
    return response


@csrf_exempt
@require_http_methods(["GET", "POST"])
@with_csp
def unsubscribe_page(request: HttpRequest, token: str) -> HttpResponse:
    """``/notifications/unsubscribe/{token}/``: GET asks, POST turns the token's kind off (the
    digest's: every kind sent in the digest). A token this server did not sign is a 400."""
    asked = unsubscribe_read(token)
    user = User.objects.filter(pk=asked.user_id, is_active=True).first() if asked else None
    if asked is None or user is None:
        return _unsubscribe(request, {"invalid": True}, status=400)
    context: dict[str, Any] = {"words": KIND_WORDS[asked.kind], "username": user.get_username()}
    if request.method == "POST":
        _turn_off(user, asked)
        context["done"] = True
    return _unsubscribe(request, context)


def _turn_off(user: User, asked: Unsubscribe) -> None:
    if asked.kind == DIGEST:
        kinds = [kind for kind, mode in notify_modes(user=user).items() if mode == NotifyMode.DIGEST]
    else:
        kinds = [asked.kind]
    notify_modes_set(user=user, modes=dict.fromkeys(kinds, NotifyMode.OFF.value))


def _unsubscribe(request: HttpRequest, context: dict[str, Any], status: int = 200) -> HttpResponse:
    response = render(request, "tracker/unsubscribe.html", context, status=status)
    response["Cache-Control"] = "private, no-store"
    response["Referrer-Policy"] = "no-referrer"  # the token is in the address
    return response
