"""Forms of the tracker's pages: the input of a new API key, and a project's write-only credential."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from django import forms

from tracker.models import Project, Scope
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
    projects = forms.MultipleChoiceField(
        choices=[],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Bound to projects",
        help_text="Tick none for a key that acts wherever you may; ticked, it acts only in those projects.",
    )

    def __init__(self, *args: Any, projects: Iterable[Project] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(project.key, f"{project.key} · {project.name}") for project in projects]
        cast("forms.MultipleChoiceField", self.fields["projects"]).choices = choices


def credential_field(help_text: str) -> forms.CharField:
    """A project's LLM credential as a form takes it: optional, never rendered back (docs/trust.md)."""
    return forms.CharField(
        required=False,
        max_length=MAX_CREDENTIAL,
        strip=True,
        widget=forms.PasswordInput(render_value=False),
        help_text=help_text,
    )
