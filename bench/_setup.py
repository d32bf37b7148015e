"""Shared set-up of the benchmarks: a throwaway database in either mode, and a large project.

Embedded mode (no DATABASE_URL/REDIS_URL) uses a temporary SQLite file;
production mode uses the database ``ballet_bench`` (or the one a benchmark
names) on the server of DATABASE_URL, created if missing.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ballet.settings.base")


def setup_django(database: str = "ballet_bench") -> str:
    """Point Django at a bench database, migrate it, and return the mode's name."""
    from ballet.settings import base

    if base.PRODUCTION_MODE:
        _ensure_pg_database(base.DATABASES["default"], database)
        base.DATABASES["default"]["NAME"] = database
        mode = "postgresql"
    else:
        path = Path(tempfile.mkdtemp(prefix="ballet-bench-")) / "bench.sqlite3"
        base.DATABASES["default"]["NAME"] = str(path)
        mode = "sqlite"
    base.LOGGING["root"]["level"] = "WARNING"  # type: ignore[index]
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return mode


def _ensure_pg_database(config: dict, name: str) -> None:
    import psycopg

    conninfo = f"host={config['HOST']} port={config['PORT'] or 5432} user={config['USER']} dbname=postgres"
    with psycopg.connect(conninfo, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            connection.execute(f'CREATE DATABASE "{name}"')


def build_project(*, items: int, knowledge: int, key: str = "BENCH"):
    """A project with ``items`` plan items and ``knowledge`` entries, bulk-inserted."""
    from django.contrib.auth.models import User

    from knowledge.models import KnowledgeEntry, KnowledgeRevision
    from tracker.models import Dependency, Item, Membership, Organization, Project

    Organization.objects.filter(slug=f"{key.lower()}-org").delete()  # a rerun starts from scratch
    Project.objects.filter(key=key).delete()
    org = Organization.objects.create(slug=f"{key.lower()}-org", name="Bench Org")
    project = Project.objects.create(organization=org, key=key, name="Bench", next_item_number=items + 1)
    user, _ = User.objects.get_or_create(username=f"{key.lower()}-user")
    Membership.objects.get_or_create(project=project, user=user, defaults={"role": "maintainer"})
    words = ["billing", "login", "export", "search", "cache", "report", "invite", "audit", "upload", "sync"]
    rows = [
        Item(
            project=project,
            kind="epic" if n % 50 == 1 else "ticket",
            number=n,
            title=f"{words[n % 10].title()} work item {n}",
            description=f"Implement the {words[n % 10]} part {n}. " * 5,
            acceptance_criteria=[f"Criterion {n}.a", f"Criterion {n}.b"],
            state=("open" if n % 50 == 1 else ["draft", "ready", "in_progress", "done"][n % 4]),
        )
        for n in range(1, items + 1)
    ]
    Item.objects.bulk_create(rows, batch_size=1000)
    by_number = dict(Item.objects.filter(project=project).values_list("number", "pk"))
    Dependency.objects.bulk_create(
        [Dependency(blocker_id=by_number[n - 1], blocked_id=by_number[n]) for n in range(3, items + 1, 3)],
        batch_size=1000,
    )
    entries = KnowledgeEntry.objects.bulk_create(
        [
            KnowledgeEntry(
                organization=org,
                kind=["document", "decision", "note", "debt"][n % 4],
                title=f"{words[n % 10].title()} knowledge {n}",
                body=f"What we know about {words[n % 10]} number {n}. " * 10,
                author=user,
                last_editor=user,
            )
            for n in range(1, knowledge + 1)
        ],
        batch_size=500,
    )
    KnowledgeRevision.objects.bulk_create(
        [
            KnowledgeRevision(
                entry=e, version=1, kind=e.kind, title=e.title, body=e.body, editor=user, actor="bench"
            )
            for e in entries
        ],
        batch_size=500,
    )
    KnowledgeEntry.projects.through.objects.bulk_create(
        [KnowledgeEntry.projects.through(knowledgeentry_id=e.pk, project_id=project.pk) for e in entries],
        batch_size=500,
    )
    _analyze()
    return project, user


def _analyze() -> None:
    """Fresh planner statistics after bulk loading, as autovacuum would give a live database."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    else:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
