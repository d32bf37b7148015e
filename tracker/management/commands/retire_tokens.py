"""``manage.py retire_tokens``: turn every legacy DRF token into an API key of its user and delete
the token (docs/api-keys.md#legacy-tokens).

Each new key has all four scopes (what the token allowed), is named "Legacy token"
and is printed once, with its user: hand it to whoever held the token. The token
is deleted in the same transaction, so a run stopped halfway leaves each token
either still working or replaced. ``--dry-run`` only counts.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from rest_framework.authtoken.models import Token

from tracker.models import Scope
from tracker.services.keys import key_create

KEY_NAME = "Legacy token"


class Command(BaseCommand):
    help = "Replace each legacy API token by an API key of its user (all scopes), printing each key once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Count the tokens; change nothing.")

    def handle(self, *args: Any, dry_run: bool = False, **options: Any) -> None:
        tokens = list(Token.objects.select_related("user").order_by("user__username"))
        if dry_run:
            self.stdout.write(f"{len(tokens)} legacy token(s) would become API keys.")
            return
        retired = 0
        for token in tokens:
            with transaction.atomic():
                if not Token.objects.filter(pk=token.pk).delete()[0]:
                    continue  # retired meanwhile by another run
                _, secret = key_create(user=token.user, name=KEY_NAME, scopes=Scope.values)
            retired += 1
            self.stdout.write(f"{token.user.get_username()}: {secret}")
        self.stdout.write(
            self.style.SUCCESS(f"Retired {retired} legacy token(s); each key is shown only here.")
        )
