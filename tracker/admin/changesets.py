"""Changeset review in the admin: read the operations, then Apply or Reject.

A changeset is never edited here. Its change page is the review (template
``admin/tracker/changeset/change_form.html``); Apply and Reject are POSTs to
their own URLs, offered to and accepted from holders of ``changeset.apply``
only, and they call the changeset services.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import RelatedOnlyFieldListFilter
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from tracker.admin.base import BalletAdmin, actor_of
from tracker.errors import BalletError, error_text
from tracker.models import Changeset, ChangesetStatus
from tracker.review import changeset_review
from tracker.services.changesets import MAX_NOTE, changeset_apply, changeset_reject
from tracker.trust.permissions import CHANGESET_APPLY, TRACKER_READ, has_permission

REVIEW_FIELDS = (
    "project",
    "number",
    "title",
    "rationale",
    "status",
    "proposed_by",
    "planner_session",
    "created_at",
    "decided_by",
    "decided_at",
    "decision_note",
    "conflict_reason",
    "created_items",
)


@admin.register(Changeset)
class ChangesetAdmin(BalletAdmin):
    """Read-only rows; the change page reviews, Apply and Reject decide."""

    rules = {"view": TRACKER_READ, "add": None, "change": None, "delete": None}
    list_display = ("number", "project", "title", "status_label", "proposed_by", "created_at")
    list_display_links = ("number", "title")
    list_filter = ("status", ("project", RelatedOnlyFieldListFilter))
    search_fields = ("title",)
    list_select_related = ("project", "proposed_by")
    fields = REVIEW_FIELDS

    @admin.display(description="status", ordering="status")
    def status_label(self, obj: Changeset) -> str:
        return format_html('<span class="changeset-status changeset-{}">{}</span>', obj.status, obj.status)

    def get_urls(self) -> list[URLPattern]:
        # Before the defaults: their "<path:object_id>/" would swallow ".../apply/".
        view = self.admin_site.admin_view
        return [
            path("<path:object_id>/apply/", view(self.apply_view), name="tracker_changeset_apply"),
            path("<path:object_id>/reject/", view(self.reject_view), name="tracker_changeset_reject"),
            *super().get_urls(),
        ]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        changeset = self.get_object(request, unquote(object_id))
        context = dict(extra_context or {})
        if changeset is not None:
            context.update(self.review_context(request, changeset))
        return super().change_view(request, object_id, form_url, context)

    def review_context(self, request: HttpRequest, changeset: Changeset) -> dict[str, Any]:
        can_decide = changeset.status == ChangesetStatus.PROPOSED and has_permission(
            request.user, changeset.project, CHANGESET_APPLY
        )
        return {
            "changeset": changeset,
            "review": changeset_review(changeset=changeset),
            "can_decide": can_decide,
            "apply_url": reverse("admin:tracker_changeset_apply", args=[changeset.pk]),
            "reject_url": reverse("admin:tracker_changeset_reject", args=[changeset.pk]),
            "max_note": MAX_NOTE,
        }

    def apply_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        changeset = self._decidable(request, object_id)
        if not isinstance(changeset, Changeset):
            return changeset
        try:
            result = changeset_apply(actor=actor_of(request), changeset=changeset)
        except BalletError as exc:
            self.message_user(request, f"Not applied: {error_text(exc)}", messages.ERROR)
        else:
            self._report(request, result)
        return self._back(changeset)

    def reject_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        changeset = self._decidable(request, object_id)
        if not isinstance(changeset, Changeset):
            return changeset
        try:
            changeset_reject(actor=actor_of(request), changeset=changeset, note=request.POST.get("note", ""))
        except BalletError as exc:
            self.message_user(request, f"Not rejected: {error_text(exc)}", messages.ERROR)
        else:
            self.message_user(request, f"Changeset #{changeset.number} rejected.", messages.SUCCESS)
        return self._back(changeset)

    def _decidable(self, request: HttpRequest, object_id: str) -> Changeset | HttpResponse:
        """The changeset a POST decides on: 404 if hidden, 403 without changeset.apply."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        changeset = self.get_object(request, unquote(object_id))
        if changeset is None:
            raise Http404("No such changeset.")
        if not has_permission(request.user, changeset.project, CHANGESET_APPLY):
            raise PermissionDenied(f"You need changeset.apply in {changeset.project.key} to decide.")
        return changeset

    def _report(self, request: HttpRequest, changeset: Changeset) -> None:
        if changeset.status == ChangesetStatus.APPLIED:
            created = ", ".join(changeset.created_items.values()) if changeset.created_items else ""
            suffix = f" Created {created}." if created else ""
            self.message_user(request, f"Changeset #{changeset.number} applied.{suffix}", messages.SUCCESS)
        else:
            self.message_user(
                request,
                f"Changeset #{changeset.number} conflicted and nothing was applied: "
                f"{changeset.conflict_reason}",
                messages.ERROR,
            )

    def _back(self, changeset: Changeset) -> HttpResponseRedirect:
        return HttpResponseRedirect(reverse("admin:tracker_changeset_change", args=[changeset.pk]))
