"""``manage.py backup FOLDER``: the database and a manifest into a new folder (ballet/backups.py,
docs/operations.md#backups). The keys and the repository mirrors are not in it, and it says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ballet.backups import BackupError, backup_create


class Command(BaseCommand):
    help = (
        "Back the database up into a new folder: pg_dump's custom format in production mode, a copy "
        "made with SQLite's online backup API in the embedded mode, and manifest.json. Safe while "
        "Ballet serves."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path, help="A new folder to write the backup into.")

    def handle(self, *args: Any, **options: Any) -> None:
        folder: Path = options["folder"]
        try:
            manifest = backup_create(target=folder)
        except BackupError as exc:
            raise CommandError(f"No backup was made: {exc.message}") from exc
        applied = sum(len(names) for names in manifest.migrations.values())
        self.stdout.write(
            f"Backed up into {folder}: {manifest.database_file} ({manifest.format}), Ballet "
            f"{manifest.ballet_version} at {manifest.commit}, {applied} migrations applied, "
            f"{manifest.created_at}."
        )
        self.stdout.write("Not in the backup, keep or remake them apart:")
        for line in manifest.not_included:
            self.stdout.write(f"  - {line}")
