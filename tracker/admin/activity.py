"""Admin of the activity log: read-only, it is the audit trail."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.contrib.admin import RelatedOnlyFieldListFilter
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from tracker.activity.filters import activity_visible
from tracker.admin.base import BalletAdmin
from tracker.models import ActivityEvent
from tracker.trust.permissions import TRACKER_READ


@admin.register(ActivityEvent)
class ActivityEventAdmin(BalletAdmin):
    """Events of the projects the user reads, and organization-wide ones of their organizations,
    less those the other apps' filters hide (``tracker/activity/filters.py``: of knowledge, only
    the entries the user reads, since an event carries the entry's title)."""

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
        return activity_visible(super().get_queryset(request), user=request.user)

    @admin.display(description="data")
    def details(self, obj: ActivityEvent) -> str:
        return format_html(
            "<pre>{}</pre>", json.dumps(obj.data, indent=2, ensure_ascii=False, sort_keys=True)
        )
