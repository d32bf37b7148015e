"""The search index: one document per item, skill and knowledge entry (docs/search.md).

The indexer (:mod:`tracker.search.indexing`) keeps these rows current from a
Celery task enqueued on commit of every write. Besides the fields here each
database keeps a lexical index the ORM does not see (migration 0003): a
generated, GIN-indexed ``search_vector`` column on PostgreSQL, and the FTS5
table ``tracker_search_fts`` on SQLite, whose rowid is the document's id.
"""

from __future__ import annotations

import uuid

from django.db import models

from tracker.models.access import Organization, Project


class SearchDocument(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    # Null for organization-wide documents: organization skills and knowledge entries.
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20)  # "item", "skill" or "knowledge"
    object_id = models.BigIntegerField()
    key = models.CharField(max_length=120)  # item key, skill name or knowledge id
    subkind = models.CharField(max_length=20, blank=True)  # item kind, knowledge kind; "" for skills
    state = models.CharField(max_length=20, blank=True)  # items only
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    # The source's version when indexed: a slower task never overwrites a newer document.
    source_version = models.PositiveIntegerField(default=0)
    # L2-normalized float32 vector, little-endian, from the backend named in embedding_model.
    embedding = models.BinaryField(null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)
    # A removed source leaves a tombstone, so readers' caches learn of the removal.
    deleted = models.BooleanField(default=False)
    # Organization-wide change counter (SearchHead.seq when last written): caches refresh past it.
    seq = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "object_id"], name="search_document_unique"),
        ]
        indexes = [models.Index(fields=["organization", "seq"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"


class SearchHead(models.Model):
    """The last search-index change of an organization; writers allocate ``seq`` under its row lock."""

    organization = models.OneToOneField(
        Organization, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    seq = models.BigIntegerField(default=0)
    # A new head (a restored or rolled-back database) tells caches to reload rather than trust seq.
    epoch = models.UUIDField(default=uuid.uuid4, editable=False)

    def __str__(self) -> str:
        return f"search head of {self.organization_id} at {self.seq}"
