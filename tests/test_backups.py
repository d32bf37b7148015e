"""``ballet/backups.py``'s refusals, in words and before anything is written; the backup and the
restore themselves run against real servers in ``tests/e2e/test_backups.py``."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from ballet import backups
from ballet.backups import DATABASE_FILES, NOT_INCLUDED, POSTGRESQL, SQLITE, BackupError, Manifest


def _backup(folder: Path, *, kind: str, migrations: dict[str, list[str]] | None = None) -> Path:
    folder.mkdir()
    (folder / DATABASE_FILES[kind]).write_bytes(b"")
    manifest = Manifest(
        manifest_version=1,
        format=kind,
        database_file=DATABASE_FILES[kind],
        created_at="2026-12-06T00:00:00+00:00",
        ballet_version="0.1.0",
        commit="abc123",
        migrations=migrations or {},
        not_included=list(NOT_INCLUDED),
    )
    (folder / "manifest.json").write_text(json.dumps(asdict(manifest)))
    return folder


def _this_mode() -> str:
    return POSTGRESQL if connection.vendor == "postgresql" else SQLITE


def _other_mode() -> str:
    return SQLITE if _this_mode() == POSTGRESQL else POSTGRESQL


def test_a_backup_of_the_other_mode_is_refused(tmp_path):
    folder = _backup(tmp_path / "b", kind=_other_mode())
    with pytest.raises(CommandError, match="Nothing was restored: The backup holds"):
        call_command("restore", str(folder))


def test_a_backup_of_newer_code_is_refused(tmp_path):
    folder = _backup(tmp_path / "b", kind=_this_mode(), migrations={"tracker": ["9999_from_the_future"]})
    with pytest.raises(BackupError, match=r"newer code .*tracker\.9999_from_the_future"):
        backups.backup_restore(source=folder)


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda f: (f / "manifest.json").unlink(), "has no manifest.json"),
        (lambda f: (f / "manifest.json").write_text("{not json"), "is not a manifest Ballet wrote"),
        (
            lambda f: (f / "manifest.json").write_text('{"format": "sqlite"}'),
            "is not a manifest Ballet wrote",
        ),
        (lambda f: (f / DATABASE_FILES[SQLITE]).unlink(), "lacks its database file"),
    ],
)
def test_a_folder_that_is_not_a_whole_backup_is_refused(tmp_path, damage, said):
    folder = _backup(tmp_path / "b", kind=SQLITE)
    damage(folder)
    with pytest.raises(BackupError, match=said):
        backups.manifest_read(folder)


def test_a_backup_goes_only_into_a_new_folder(tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(CommandError, match="already exists"):
        call_command("backup", str(tmp_path / "taken"))
    with pytest.raises(CommandError, match="No folder"):
        call_command("backup", str(tmp_path / "missing" / "b"))
    assert not (tmp_path / "missing").exists()


def test_a_missing_pg_dump_is_named(monkeypatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(BackupError, match="pg_dump is not installed here"):
        backups._run(["pg_dump", "--version"])


def test_a_backup_that_fails_leaves_no_folder_behind(tmp_path, monkeypatch, db):
    """Production mode without pg_dump; the embedded mode's database file gone from under it."""
    monkeypatch.setenv("PATH", "")
    settings = backups._settings()
    monkeypatch.setattr(backups, "_settings", lambda: {**settings, "NAME": str(tmp_path / "gone.sqlite3")})
    with pytest.raises(BackupError, match=r"pg_dump is not installed|No SQLite database"):
        backups.backup_create(target=tmp_path / "b")
    assert not (tmp_path / "b").exists()
