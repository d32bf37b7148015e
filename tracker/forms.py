"""Forms of the tracker's pages: the input of a new API key."""

from __future__ import annotations

from django import forms

from tracker.models import Scope
from tracker.services.keys import MAX_EXPIRY_DAYS, MAX_NAME


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
