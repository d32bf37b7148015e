"""Admin of the activity log: read-only, it is the audit trail."""

from __future__ import annotations

import json

from django.contrib import admin
from django.contrib.admin import RelatedOnlyFieldListFilter
from django.utils.html import format_html

from tracker.admin.base import BalletAdmin
from tracker.models import ActivityEvent
from tracker.permissions import TRACKER_READ


@admin.register(ActivityEvent)
class ActivityEventAdmin(BalletAdmin):
    """Events of the projects the user reads, and organization-wide ones of their organizations."""

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

    @admin.display(description="data")
    def details(self, obj: ActivityEvent) -> str:
        return format_html(
            "<pre>{}</pre>", json.dumps(obj.data, indent=2, ensure_ascii=False, sort_keys=True)
        )
