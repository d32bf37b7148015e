"""``manage.py restore FOLDER``: a backup of ``manage.py backup`` into the configured database,
which must be empty (ballet/backups.py, docs/operations.md#backups)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ballet.backups import BackupError, backup_restore


class Command(BaseCommand):
    help = (
        "Restore a backup folder into the configured database (DATABASE_URL, or the embedded "
        "SQLite file). The database must be empty; stop every process that serves it first."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path, help="The folder manage.py backup wrote.")
        parser.add_argument(
            "--force",
            action="store_true",
            help="Restore into a database that is not empty, replacing what the backup holds.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        folder: Path = options["folder"]
        try:
            restored = backup_restore(source=folder, force=options["force"])
        except BackupError as exc:
            raise CommandError(f"Nothing was restored: {exc.message}") from exc
        manifest = restored.manifest
        self.stdout.write(
            f"Restored {folder} (Ballet {manifest.ballet_version} at {manifest.commit}, "
            f"{manifest.created_at})."
        )
        if restored.pending:
            self.stdout.write(
                f"This code has {len(restored.pending)} migrations the backup lacks "
                f"({', '.join(restored.pending[:3])}…): run manage.py migrate before starting Ballet."
            )
        self.stdout.write(
            "Set the same DJANGO_SECRET_KEY and BALLET_CREDENTIAL_KEY as the backed-up instance; "
            "the worker fetches the repository mirrors again."
        )
