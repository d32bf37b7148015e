"""Forms of the tracker's pages: the input of a new API key, and a project's write-only credential."""

from __future__ import annotations

from django import forms

from tracker.models import Scope
from tracker.services.keys import MAX_EXPIRY_DAYS, MAX_NAME
from tracker.services.projects import MAX_CREDENTIAL


class KeyCreateForm(forms.Form):
    name = forms.CharField(max_length=MAX_NAME, help_text="Which agent or script holds it, such as “CI bot”.")
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices, widget=forms.CheckboxSelectMultiple, initial=[Scope.READ, Scope.ASK]
    )
    expires_in_days = forms.IntegerField(
        label="Expires after (days)",
        min_value=1,
        max_value=MAX_EXPIRY_DAYS,
        required=False,
        help_text="Leave empty for a key that does not expire.",
    )


def credential_field(help_text: str) -> forms.CharField:
    """A project's LLM credential as a form takes it: optional, never rendered back (docs/trust.md)."""
    return forms.CharField(
        required=False,
        max_length=MAX_CREDENTIAL,
        strip=True,
        widget=forms.PasswordInput(render_value=False),
        help_text=help_text,
    )
