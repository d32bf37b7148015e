"""REST representations of knowledge entries and the strict input shapes of their writes."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from knowledge.models import KnowledgeEntry, KnowledgeKind, KnowledgeRevision
from knowledge.selectors import KnowledgeLinks
from knowledge.services import MAX_BODY, MAX_TITLE
from tracker.web.serializers import MAX_INT, StrictCharField, StrictIntegerField, StrictSerializer

MAX_LINKS = 100


class KnowledgeRevisionSerializer(serializers.Serializer[Any]):
    version = serializers.IntegerField()
    editor = serializers.CharField(source="editor.username")
    created_at = serializers.DateTimeField()


class KnowledgeEntrySerializer(serializers.Serializer[KnowledgeEntry]):
    """An entry with the links the caller sees (:func:`knowledge.selectors.knowledge_links`, ``links``
    in the context)."""

    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=KnowledgeKind.choices)
    title = serializers.CharField()
    version = serializers.IntegerField()
    author = serializers.CharField(source="author.username")
    last_editor = serializers.CharField(source="last_editor.username")
    projects = serializers.SerializerMethodField()
    items = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def _links(self, entry: KnowledgeEntry) -> KnowledgeLinks:
        links: dict[int, KnowledgeLinks] = self.context["links"]
        return links.get(entry.pk, NO_LINKS)

    def get_projects(self, entry: KnowledgeEntry) -> list[str]:
        """Keys of the linked projects."""
        return self._links(entry).projects

    def get_items(self, entry: KnowledgeEntry) -> list[str]:
        """Keys of the linked items."""
        return self._links(entry).items


NO_LINKS = KnowledgeLinks()


class KnowledgeDetailSerializer(KnowledgeEntrySerializer):
    """An entry with its body and its revisions (``revisions`` in the context)."""

    body = serializers.CharField()
    revisions = serializers.SerializerMethodField()

    @extend_schema_field(KnowledgeRevisionSerializer(many=True, help_text="Every version, newest first."))
    def get_revisions(self, entry: KnowledgeEntry) -> Any:
        """Every version, newest first."""
        revisions: list[KnowledgeRevision] = self.context["revisions"]
        return KnowledgeRevisionSerializer(revisions, many=True).data


class KnowledgeFilterSerializer(serializers.Serializer[Any]):
    q = serializers.CharField(
        max_length=200,
        required=False,
        allow_blank=True,
        help_text='What to find, in web-search syntax ("a phrase", or, -word): hybrid search, best first.',
    )
    kind = serializers.ChoiceField(choices=KnowledgeKind.choices, required=False, allow_blank=True)
    project = serializers.CharField(
        max_length=10, required=False, allow_blank=True, help_text="A project key."
    )


class KnowledgeCreateSerializer(StrictSerializer):
    kind = serializers.ChoiceField(choices=KnowledgeKind.choices)
    title = StrictCharField(max_length=MAX_TITLE)
    body = StrictCharField(
        max_length=MAX_BODY, required=False, allow_blank=True, trim_whitespace=False, default=""
    )
    projects = serializers.ListField(
        child=StrictCharField(max_length=10),
        max_length=MAX_LINKS,
        help_text="Keys of the projects to link (at least one).",
    )
    items = serializers.ListField(
        child=StrictCharField(max_length=30),
        max_length=MAX_LINKS,
        required=False,
        default=list,
        help_text="Keys of items of the linked projects.",
    )


class KnowledgeUpdateSerializer(StrictSerializer):
    version = StrictIntegerField(min_value=1, max_value=MAX_INT, help_text="The version you read.")
    kind = serializers.ChoiceField(choices=KnowledgeKind.choices, required=False)
    title = StrictCharField(max_length=MAX_TITLE, required=False)
    body = StrictCharField(max_length=MAX_BODY, required=False, allow_blank=True, trim_whitespace=False)
    projects = serializers.ListField(
        child=StrictCharField(max_length=10),
        max_length=MAX_LINKS,
        required=False,
        help_text="Replaces the links.",
    )
    items = serializers.ListField(
        child=StrictCharField(max_length=30),
        max_length=MAX_LINKS,
        required=False,
        help_text="Replaces the links.",
    )
