"""Backups of the database and their restore (docs/operations.md#backups).

A backup is a folder: the database (``pg_dump --format=custom`` of ``DATABASE_URL``, or a
copy of the embedded SQLite file through SQLite's online backup API) and ``manifest.json``
(Ballet's version and commit, the migrations applied, the date, and what the backup leaves
out). Everything Ballet keeps is in the database, search documents and their vectors
included; the keys are not (the operator keeps them apart from the data they unlock), nor the
repository mirrors (the worker fetches them again), nor Redis (a channel layer, a cache and a
queue, nothing to keep).

A restore goes into an empty database and refuses one that is not (``force`` replaces what
the backup holds), and refuses a backup whose migrations this code does not know: that schema
is for newer code. It sits here, above the apps, because it copies every app's tables at once
and reads the database settings, not any app's models.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tomllib
from contextlib import closing
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, connections
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from tracker.errors import BalletError

MANIFEST = "manifest.json"
MANIFEST_VERSION = 1
POSTGRESQL = "postgresql-custom"
SQLITE = "sqlite"
DATABASE_FILES = {POSTGRESQL: "database.pgdump", SQLITE: "database.sqlite3"}
# pg_dump and pg_restore of a large database take a while; a hung one (a lock it waits on) must not
# hold a cron job for ever.
PG_TIMEOUT_SECONDS = 6 * 3600
NOT_INCLUDED = (
    "DJANGO_SECRET_KEY and BALLET_CREDENTIAL_KEY (with BALLET_CREDENTIAL_KEY_FALLBACKS): keep them "
    "apart from the backup; without the credential key the projects' credentials cannot be read",
    "the repository mirrors under [repositories] path: the worker fetches them again",
    "Redis: the channel layer, the cache and Celery's queue hold nothing to keep",
    "the static files: manage.py collectstatic makes them again",
)


class BackupError(BalletError):
    """A backup or a restore that cannot be made as asked; nothing was changed."""

    code = "backup"


@dataclass(frozen=True)
class Manifest:
    """What ``manifest.json`` says about a backup."""

    manifest_version: int
    format: str  # POSTGRESQL or SQLITE
    database_file: str
    created_at: str
    ballet_version: str
    commit: str
    migrations: dict[str, list[str]]  # app label -> the names of its applied migrations, sorted
    not_included: list[str]


@dataclass(frozen=True)
class Restored:
    """A restore done: the backup's manifest, and this code's migrations it still lacks."""

    manifest: Manifest
    pending: list[str]  # "app.name" of this code's migrations not applied in the backup


def backup_create(*, target: Path) -> Manifest:
    """Back the configured database up into the new folder ``target``, the manifest last: a
    folder without one is a backup that did not finish."""
    kind = _database_format()
    _check_target(target)
    migrations = _applied_migrations()  # and a database that cannot be opened says so here
    target.mkdir(mode=0o700)  # the dump holds password hashes, transcripts, encrypted credentials
    database = target / DATABASE_FILES[kind]
    partial = database.with_name(f".{database.name}.partial")
    try:
        if kind == POSTGRESQL:
            _pg_dump(partial)
        else:
            _sqlite_copy(source=Path(_settings()["NAME"]), target=partial)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)  # the same command can be run again as it was
        raise
    partial.rename(database)
    manifest = Manifest(
        manifest_version=MANIFEST_VERSION,
        format=kind,
        database_file=database.name,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        ballet_version=_version(),
        commit=_commit(),
        migrations=migrations,
        not_included=list(NOT_INCLUDED),
    )
    (target / MANIFEST).write_text(json.dumps(asdict(manifest), indent=2) + "\n")
    return manifest


def backup_restore(*, source: Path, force: bool = False) -> Restored:
    """Restore the backup folder ``source`` into the configured database, which must be empty
    unless ``force`` (then what the backup holds replaces what the database has). Stop every
    process serving that database first."""
    manifest = manifest_read(source)
    kind = _database_format()
    if manifest.format != kind:
        raise BackupError(_wrong_mode(manifest.format))
    unknown = sorted(_names(manifest.migrations) - _known_migrations())
    if unknown:
        raise BackupError(
            f"The backup was made by newer code (Ballet {manifest.ballet_version}, commit "
            f"{manifest.commit}): this code does not know its migrations {', '.join(unknown[:5])}. "
            "Restore it with that version or a later one."
        )
    tables = _tables()
    if tables and not force:
        raise BackupError(
            f"The database {_settings()['NAME']} is not empty ({len(tables)} tables, "
            f"{', '.join(sorted(tables)[:3])}…). Restore into an empty database, or pass --force "
            "to replace what the backup holds (stop every process that serves it first)."
        )
    database = source / manifest.database_file
    connections.close_all()
    if kind == POSTGRESQL:
        _pg_restore(database, replace=bool(tables))
    else:
        _sqlite_copy(source=database, target=Path(_settings()["NAME"]))
    applied = _names(_applied_migrations())
    return Restored(manifest=manifest, pending=sorted(_known_migrations() - applied))


def manifest_read(source: Path) -> Manifest:
    """The manifest of the backup folder ``source``; a clear error for anything else."""
    if not source.is_dir():
        raise BackupError(f"No backup folder at {source}.")
    path = source / MANIFEST
    if not path.is_file():
        raise BackupError(f"{source} has no {MANIFEST}: not a backup, or one that did not finish.")
    try:
        fields: dict[str, Any] = json.loads(path.read_text())
        manifest = Manifest(**fields)
    except (ValueError, TypeError) as exc:
        raise BackupError(f"{path} is not a manifest Ballet wrote: {exc}") from exc
    if manifest.format not in DATABASE_FILES or manifest.database_file != DATABASE_FILES[manifest.format]:
        raise BackupError(f"{path} names an unknown format {manifest.format!r}.")
    if not (source / manifest.database_file).is_file():
        raise BackupError(f"{source} lacks its database file {manifest.database_file}.")
    return manifest


def _settings() -> dict[str, Any]:
    """The configured database's settings, as the connection reads them (a test database too)."""
    return dict(connection.settings_dict)


def _database_format() -> str:
    vendor = connection.vendor
    if vendor == "postgresql":
        return POSTGRESQL
    if vendor == "sqlite":
        return SQLITE
    raise BackupError(f"Ballet backs up PostgreSQL and SQLite, not {vendor}.")


def _wrong_mode(backup: str) -> str:
    if backup == POSTGRESQL:
        return (
            "The backup holds a PostgreSQL dump, and this process runs the embedded mode (SQLite): "
            "set DATABASE_URL and REDIS_URL to restore it into PostgreSQL."
        )
    return (
        "The backup holds an embedded (SQLite) database, and this process runs on PostgreSQL: "
        "unset DATABASE_URL and REDIS_URL, and set BALLET_SQLITE_PATH to where it should go."
    )


def _check_target(target: Path) -> None:
    if target.exists():
        raise BackupError(f"{target} already exists: name a new folder for the backup.")
    if not target.parent.is_dir():
        raise BackupError(f"No folder {target.parent} to make the backup {target.name} in.")
    if not os.access(target.parent, os.W_OK):
        raise BackupError(f"The folder {target.parent} is not writable.")


def _pg_environment() -> dict[str, str]:
    """libpq's variables for the configured database: a password in them is not shown by ``ps``,
    as one on the command line would be."""
    database = _settings()
    env = dict(os.environ)
    names = {"HOST": "PGHOST", "PORT": "PGPORT", "USER": "PGUSER", "PASSWORD": "PGPASSWORD"}
    for setting, variable in names.items():
        if database.get(setting):
            env[variable] = str(database[setting])
    sslmode = (database.get("OPTIONS") or {}).get("sslmode")
    if sslmode:
        env["PGSSLMODE"] = str(sslmode)
    return env


def _pg_dump(target: Path) -> None:
    _run(["pg_dump", "--format=custom", f"--file={target}", "--dbname", str(_settings()["NAME"])])


def _pg_restore(dump: Path, *, replace: bool) -> None:
    # Objects owned by whoever restores, privileges as the new server grants them; one transaction,
    # so a failure leaves the database as it was.
    options = ["--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction"]
    if replace:
        options += ["--clean", "--if-exists"]
    _run(["pg_restore", *options, "--dbname", str(_settings()["NAME"]), str(dump)])


def _run(command: list[str]) -> None:
    if shutil.which(command[0]) is None:
        raise BackupError(
            f"{command[0]} is not installed here: install PostgreSQL's client tools "
            "(Debian: apt-get install postgresql-client), of the server's major version or newer."
        )
    try:
        result = subprocess.run(  # noqa: S603 - a fixed program; the arguments are paths and a name
            command,
            env=_pg_environment(),
            capture_output=True,
            text=True,
            timeout=PG_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise BackupError(f"{command[0]} took longer than {PG_TIMEOUT_SECONDS} s and was stopped.") from exc
    if result.returncode:
        raise BackupError(f"{command[0]} failed (exit {result.returncode}): {result.stderr.strip()}")


def _sqlite_copy(*, source: Path, target: Path) -> None:
    """Copy ``source`` into ``target`` with SQLite's online backup API: a consistent copy while
    the server writes (WAL: writers go on), and a restore that replaces every page of ``target``."""
    if not source.is_file():
        raise BackupError(f"No SQLite database at {source}.")
    try:
        with (
            closing(sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)) as reader,
            closing(sqlite3.connect(target)) as writer,
        ):
            reader.backup(writer)
    except sqlite3.Error as exc:
        raise BackupError(f"Copying {source} to {target} failed: {exc}") from exc


def _tables() -> list[str]:
    try:
        tables: list[str] = connection.introspection.table_names()
    except DatabaseError as exc:
        raise BackupError(
            f"Cannot open the database {_settings()['NAME']}: {str(exc).strip().rstrip('.')}. "
            "Create it first (createdb), and check DATABASE_URL."
        ) from exc
    return tables


def _applied_migrations() -> dict[str, list[str]]:
    _tables()  # a database that cannot be opened says so, in words
    applied: dict[str, list[str]] = {}
    for app, name in MigrationRecorder(connection).applied_migrations():
        applied.setdefault(app, []).append(name)
    return {app: sorted(names) for app, names in sorted(applied.items())}


def _known_migrations() -> set[str]:
    """Every migration this code holds, as ``app.name``."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    return {f"{app}.{name}" for app, name in loader.disk_migrations}


def _names(migrations: dict[str, list[str]]) -> set[str]:
    return {f"{app}.{name}" for app, names in migrations.items() for name in names}


def _version() -> str:
    with (Path(settings.BASE_DIR) / "pyproject.toml").open("rb") as handle:
        version: str = tomllib.load(handle)["project"]["version"]
    return version


def _commit() -> str:
    """The checkout's commit, or ``unknown`` where there is no Git (an image)."""
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"],  # noqa: S607 - git from PATH, as the repository mirrors run it
            cwd=settings.BASE_DIR,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return result.stdout.strip() if result.returncode == 0 else "unknown"
