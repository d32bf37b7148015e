"""``manage.py search_backfill``: (re)index every item, skill and knowledge entry of organizations.

For an install that had data before search existed (``--all --unindexed``,
which ``make run`` does), after rows were written around the services, or
after switching the embedding backend. Documents are written in
batches, in this process, and the progress is printed per batch; documents
whose object is gone become tombstones.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from tracker.models import Organization, SearchDocument, SearchHead
from tracker.search import lexical_sqlite
from tracker.search.indexing import documents_write, search_index_refresh, search_sources


class Command(BaseCommand):
    help = "Index every item, skill and knowledge entry of an organization for search, reporting progress."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("organizations", nargs="*", metavar="SLUG", help="Organizations to index.")
        parser.add_argument("--all", action="store_true", help="Index every organization.")
        parser.add_argument(
            "--unindexed",
            action="store_true",
            help="Only organizations never indexed yet (an install upgraded to search); quiet if none.",
        )
        parser.add_argument("--batch", type=int, default=64, help="Documents per write (default 64).")

    def handle(self, *args: Any, **options: Any) -> None:
        slugs: list[str] = options["organizations"]
        if options["all"] == bool(slugs):
            raise CommandError("Name organizations by slug, or pass --all.")
        organizations = Organization.objects.order_by("slug")
        if slugs:
            organizations = organizations.filter(slug__in=slugs)
            missing = sorted(set(slugs) - set(organizations.values_list("slug", flat=True)))
            if missing:
                raise CommandError(f"Unknown organization: {', '.join(missing)}.")
        if options["unindexed"]:
            organizations = organizations.exclude(pk__in=SearchHead.objects.values("organization_id"))
        batch = max(1, options["batch"])
        for organization in organizations:
            self._organization(organization, batch)
        if connection.vendor == "sqlite":
            lexical_sqlite.purge_orphans()

    def _organization(self, organization: Organization, batch: int) -> None:
        started = time.perf_counter()
        total = 0
        for kind, source in sorted(search_sources().items()):
            ids = source.ids_of_organization(organization.pk)
            for done in range(0, len(ids), batch):
                search_index_refresh(kind=kind, ids=ids[done : done + batch])
                count = min(done + batch, len(ids))
                self.stdout.write(
                    f"{organization.slug} {kind}: {count}/{len(ids)} ({100 * count // len(ids)}%)"
                )
            total += len(ids) + self._drop_stale(organization, kind, set(ids))
        elapsed = time.perf_counter() - started
        rate = total / elapsed if elapsed else 0.0
        self.stdout.write(
            self.style.SUCCESS(f"{organization.slug}: {total} documents in {elapsed:.1f} s ({rate:.0f}/s)")
        )

    def _drop_stale(self, organization: Organization, kind: str, ids: set[int]) -> int:
        indexed = SearchDocument.objects.filter(organization=organization, kind=kind, deleted=False)
        stale = set(indexed.values_list("object_id", flat=True)) - ids
        return documents_write([], removed=sorted(stale), kind=kind) if stale else 0
