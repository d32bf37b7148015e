"""Each process's copy of an organization's search documents: metadata, text and vectors.

Semantic ranking compares the query's vector with every document's, and
results need titles and text for snippets, so a process keeps them in memory
per organization (about 1.6 KB a document with the local model's vectors).
Each search first reads the organization's :class:`SearchHead`, one
primary-key lookup; if its ``seq`` moved on, only the documents written since
are read again, and a new ``epoch`` reloads everything. A removed document is
a tombstone written with a new ``seq``; rows that a cascade deleted (a
deleted project) stay cached but only belong to scopes nobody can ask for.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from tracker.models import SearchDocument, SearchHead
from tracker.search.embeddings import from_bytes
from tracker.search.types import KNOWLEDGE, SKILL, SearchScope

FIELDS = ("id", "kind", "key", "subkind", "state", "title", "body", "project_id", "deleted", "seq")


@dataclass(frozen=True)
class CachedDocument:
    id: int
    kind: str
    key: str
    subkind: str
    state: str
    title: str
    body: str
    project_id: int | None

    def in_scope(self, scope: SearchScope) -> bool:
        """The same test as the lexical rankings' SQL (:func:`tracker.search.lexical.scope_sql`)."""
        if self.kind not in scope.kinds:
            return False
        if self.project_id is not None and self.project_id != scope.project_id:
            return False
        if scope.subkinds and self.kind != SKILL and self.subkind not in scope.subkinds:
            return False
        if self.kind == KNOWLEDGE and self.key in scope.hidden_knowledge:
            return False
        return not scope.states or self.state in scope.states


@dataclass
class OrganizationIndex:
    epoch: uuid.UUID | None = None
    seq: int = -1
    documents: dict[int, CachedDocument] = field(default_factory=dict)
    vectors: dict[int, npt.NDArray[np.float32]] = field(default_factory=dict)
    model: str = ""
    _matrix: tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None = None
    _keys: dict[str, list[CachedDocument]] | None = None

    def apply(self, rows: list[dict[str, object]], model: str) -> None:
        """Take in documents read from the database (deleted ones leave)."""
        for row in rows:
            doc_id = int(str(row["id"]))
            self.documents.pop(doc_id, None)
            self.vectors.pop(doc_id, None)
            if row["deleted"]:
                continue
            self.documents[doc_id] = CachedDocument(
                **{name: row[name] for name in FIELDS if name not in ("deleted", "seq")}  # type: ignore[arg-type]
            )
            embedding = row["embedding"]
            if embedding and row["embedding_model"] == model:
                self.vectors[doc_id] = from_bytes(embedding)  # type: ignore[arg-type]
            self.seq = max(self.seq, int(str(row["seq"])))
        self._matrix = None
        self._keys = None

    def matrix(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Ids and the matrix of their vectors, row by row."""
        if self._matrix is None:
            ids = np.fromiter(self.vectors, dtype=np.int64, count=len(self.vectors))
            rows = [self.vectors[int(i)] for i in ids]
            matrix = np.vstack(rows) if rows else np.zeros((0, 1), dtype=np.float32)
            self._matrix = (ids, matrix)
        return self._matrix

    def _by_key(self) -> dict[str, list[CachedDocument]]:
        if self._keys is None:
            self._keys = {}
            for doc in self.documents.values():
                self._keys.setdefault(doc.key, []).append(doc)
        return self._keys

    def by_key(self, scope: SearchScope, key: str) -> CachedDocument | None:
        return next((d for d in self._by_key().get(key, ()) if d.in_scope(scope)), None)

    def shadows(self, doc: CachedDocument, scope: SearchScope) -> bool:
        """Is ``doc`` an organization skill that the project's own skill of the same name hides?"""
        if doc.kind != SKILL or doc.project_id is not None or scope.project_id is None:
            return False
        return any(d.kind == SKILL and d.project_id == scope.project_id for d in self._by_key()[doc.key])


_indexes: dict[int, OrganizationIndex] = {}
_lock = threading.Lock()


def organization_index(organization_id: int, model: str) -> OrganizationIndex:
    """The organization's documents as of now: one query when nothing changed."""
    head = SearchHead.objects.filter(organization_id=organization_id).values_list("epoch", "seq").first()
    with _lock:
        index = _indexes.get(organization_id)
        if head is None:
            _indexes.pop(organization_id, None)
            return OrganizationIndex()
        epoch, seq = head
        if index is None or index.epoch != epoch or index.model != model:
            index = _indexes[organization_id] = OrganizationIndex(epoch=epoch, model=model)
        if seq > index.seq:
            changed = SearchDocument.objects.filter(organization_id=organization_id, seq__gt=index.seq)
            index.apply(list(changed.order_by("seq").values(*FIELDS, "embedding", "embedding_model")), model)
            index.seq = seq
        return index


def organization_index_forget() -> None:
    """Drop every cached organization (tests that reuse ids across rolled-back transactions)."""
    with _lock:
        _indexes.clear()
