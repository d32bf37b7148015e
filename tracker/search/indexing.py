"""Keeping the search index current: the sources of documents, and writing documents and tombstones.

Every service that writes an item, a skill or a knowledge entry calls
:func:`tracker.tasks.search_index_on_commit`; when its transaction commits, the
Celery task (eager in the embedded mode) reads the objects as they are then
and writes their documents: :func:`search_index_refresh`. An object that no
longer exists leaves a tombstone. ``settings.SEARCH_SOURCES`` names the
:class:`~tracker.search.types.SearchSource` of each kind (tracker: items and
skills; knowledge: entries): the configuration wires the apps together, so the
tracker never imports the knowledge app.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils.module_loading import import_string

from tracker.models import SearchDocument, SearchHead
from tracker.search import lexical_sqlite
from tracker.search.embeddings import EmbeddingBackend, embedding_backend, to_bytes
from tracker.search.types import DocumentSpec, SearchSource

UPDATED_FIELDS = (
    "organization",
    "project",
    "key",
    "subkind",
    "state",
    "title",
    "body",
    "source_version",
    "embedding",
    "embedding_model",
    "deleted",
    "seq",
)


def search_sources() -> dict[str, SearchSource]:
    """The source of each kind, by kind, as ``settings.SEARCH_SOURCES`` names them."""
    sources: list[SearchSource] = [import_string(path) for path in settings.SEARCH_SOURCES]
    return {source.kind: source for source in sources}


def search_index_refresh(*, kind: str, ids: list[int], backend: EmbeddingBackend | None = None) -> int:
    """Index the objects ``ids`` of ``kind`` as they are now; the number of documents written."""
    specs = search_sources()[kind].load(ids)
    found = {spec.object_id for spec in specs}
    return documents_write(specs, removed=[i for i in ids if i not in found], kind=kind, backend=backend)


def documents_write(
    specs: list[DocumentSpec],
    *,
    removed: Iterable[int] = (),
    kind: str = "",
    backend: EmbeddingBackend | None = None,
) -> int:
    """Embed ``specs`` (outside any transaction: it is the slow part), then write them and tombstones.

    ``specs`` and ``removed`` are of one kind, ``kind``.
    """
    assert all(spec.kind == (kind or specs[0].kind) for spec in specs)
    backend = backend or embedding_backend()
    vectors = backend.embed([spec.embedding_text for spec in specs])
    with transaction.atomic():
        written = _upsert(specs, [to_bytes(v) for v in vectors], backend.name)
        return written + _tombstone(kind, list(removed))


def _advance(organization_id: int) -> int:
    """The organization's next seq, allocated under its head's row lock until commit."""
    SearchHead.objects.bulk_create([SearchHead(organization_id=organization_id)], ignore_conflicts=True)
    SearchHead.objects.filter(pk=organization_id).update(seq=F("seq") + 1)
    return SearchHead.objects.values_list("seq", flat=True).get(pk=organization_id)


def _upsert(specs: list[DocumentSpec], vectors: list[bytes], model: str) -> int:
    if not specs:
        return 0
    current = dict(
        SearchDocument.objects.select_for_update()
        .filter(kind=specs[0].kind, object_id__in=[s.object_id for s in specs])
        .values_list("object_id", "source_version")
    )
    fresh = [
        (s, v) for s, v in zip(specs, vectors, strict=True) if current.get(s.object_id, 0) <= s.source_version
    ]
    seqs = {org: _advance(org) for org in sorted({s.organization_id for s, _ in fresh})}
    rows = [
        SearchDocument(
            organization_id=s.organization_id,
            project_id=s.project_id,
            kind=s.kind,
            object_id=s.object_id,
            key=s.key,
            subkind=s.subkind,
            state=s.state,
            title=s.title[:200],
            body=s.body,
            source_version=s.source_version,
            embedding=vector,
            embedding_model=model,
            deleted=False,
            seq=seqs[s.organization_id],
        )
        for s, vector in fresh
    ]
    SearchDocument.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["kind", "object_id"], update_fields=UPDATED_FIELDS
    )
    if connection.vendor == "sqlite":
        written = SearchDocument.objects.filter(
            kind=specs[0].kind, object_id__in=[s.object_id for s, _ in fresh]
        )
        lexical_sqlite.write(written.values_list("id", "title", "body"), removed=())
    return len(rows)


def _tombstone(kind: str, object_ids: list[int]) -> int:
    rows = list(
        SearchDocument.objects.select_for_update()
        .filter(kind=kind, object_id__in=object_ids, deleted=False)
        .values_list("id", "organization_id")
    )
    for organization_id in sorted({org for _, org in rows}):
        ids = [doc_id for doc_id, org in rows if org == organization_id]
        SearchDocument.objects.filter(pk__in=ids).update(
            deleted=True, title="", body="", embedding=None, seq=_advance(organization_id)
        )
    if rows and connection.vendor == "sqlite":
        lexical_sqlite.write((), removed=[doc_id for doc_id, _ in rows])
    return len(rows)
