"""Admin of work (docs/domain.md#work): claims, read-only with their reports, and a Release action
for holders of ``tracker.write`` that calls :func:`tracker.services.work.claim_release`."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import RelatedOnlyFieldListFilter
from django.db.models import QuerySet
from django.http import HttpRequest

from tracker.admin.base import BalletAdmin, actor_of
from tracker.errors import BalletError, error_text
from tracker.models import Claim, ClaimStatus, Report
from tracker.selectors import claim_as_read
from tracker.services.work import claim_release
from tracker.trust.permissions import TRACKER_READ, TRACKER_WRITE, is_superuser, project_ids_with

CLAIM_FIELDS = (
    "project",
    "item",
    "holder",
    "status_now",
    "created_at",
    "renewed_at",
    "expires_at",
    "ended_at",
    "end_reason",
)


class ReportInline(admin.TabularInline):
    """A claim's reports, as its holder wrote them; never edited."""

    model = Report
    extra = 0
    can_delete = False
    fields = ("created_at", "kind", "author", "summary", "links", "details")
    readonly_fields = fields
    ordering = ("created_at", "pk")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).select_related("author")

    # The claim's page is shown only to those who read its project (ClaimAdmin).
    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Claim)
class ClaimAdmin(BalletAdmin):
    """Read-only rows; Release lets the selected active claims go, their tickets back to ready."""

    rules = {"view": TRACKER_READ, "add": None, "change": None, "delete": None}
    list_display = ("item", "holder", "status_now", "expires_at", "created_at")
    list_filter = ("status", ("project", RelatedOnlyFieldListFilter))
    search_fields = ("holder__username", "end_reason")
    list_select_related = ("item__project", "holder", "project")
    fields = CLAIM_FIELDS
    readonly_fields = CLAIM_FIELDS
    inlines = (ReportInline,)
    actions = ("release",)

    @admin.display(description="status", ordering="status")
    def status_now(self, claim: Claim) -> str:
        """As every read shows it: a claim whose lease ran out is expired before the sweep says so."""
        shown = claim_as_read(claim)
        return claim.status if shown is claim else f"{shown.status} (its lease ran out; not swept yet)"

    def has_release_permission(self, request: HttpRequest) -> bool:
        """Offered to those who hold tracker.write in some project; each claim is checked again."""
        return is_superuser(request.user) or bool(project_ids_with(request.user, TRACKER_WRITE))

    @admin.action(description="Release the selected claims (tickets back to ready)", permissions=["release"])
    def release(self, request: HttpRequest, queryset: QuerySet[Claim]) -> None:
        actor = actor_of(request)
        released, refused = [], []
        for claim in queryset.filter(status=ClaimStatus.ACTIVE).select_related(
            "project", "item__project", "holder"
        ):
            try:
                claim_release(actor=actor, claim=claim, reason="released in the admin")
            except BalletError as exc:
                refused.append(f"{claim.item.key}: {error_text(exc)}")
            else:
                released.append(claim.item.key)
        if released:
            self.message_user(request, f"Released the claims on {', '.join(released)}.", messages.SUCCESS)
        if refused:
            self.message_user(request, f"Not released: {'; '.join(refused)}", messages.ERROR)
        if not released and not refused:
            self.message_user(request, "None of the selected claims is active.", messages.WARNING)
