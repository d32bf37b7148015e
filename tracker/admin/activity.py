"""Admin of the activity log: read-only, it is the audit trail."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.contrib.admin import RelatedOnlyFieldListFilter
from django.db.models import CharField, Q, QuerySet, Value
from django.db.models.functions import Concat
from django.http import HttpRequest
from django.utils.html import format_html

from knowledge.selectors import knowledge_visible
from tracker.admin.base import BalletAdmin
from tracker.models import ActivityEvent
from tracker.permissions import TRACKER_READ


@admin.register(ActivityEvent)
class ActivityEventAdmin(BalletAdmin):
    """Events of the projects the user reads, and organization-wide ones of their organizations
    (of knowledge, only the entries the user reads: an event carries the entry's title)."""

    organization_path = "organization"
    rules = {"view": TRACKER_READ, "add": None, "change": None, "delete": None}
    list_display = ("seq", "created_at", "project", "actor", "on_behalf_of", "verb", "target")
    list_filter = ("verb", ("project", RelatedOnlyFieldListFilter))
    search_fields = ("actor", "target")
    list_select_related = ("project", "on_behalf_of")
    fields = (
        "organization",
        "project",
        "seq",
        "created_at",
        "actor",
        "on_behalf_of",
        "verb",
        "target",
        "details",
    )
    readonly_fields = ("details",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        readable = knowledge_visible(user=request.user).annotate(
            target=Concat(Value("knowledge:"), "pk", output_field=CharField())
        )
        hidden_knowledge = Q(verb__startswith="knowledge.") & ~Q(target__in=readable.values("target"))
        return super().get_queryset(request).exclude(hidden_knowledge)

    @admin.display(description="data")
    def details(self, obj: ActivityEvent) -> str:
        return format_html(
            "<pre>{}</pre>", json.dumps(obj.data, indent=2, ensure_ascii=False, sort_keys=True)
        )
