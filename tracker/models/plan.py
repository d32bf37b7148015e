"""The plan: milestones, epics and tickets, and the dependencies between them."""

from __future__ import annotations

from django.db import models

from tracker.models.access import Project


class ItemKind(models.TextChoices):
    MILESTONE = "milestone"
    EPIC = "epic"
    TICKET = "ticket"


TICKET_STATES = ("draft", "ready", "in_progress", "in_review", "done", "cancelled")
MILESTONE_STATES = ("open", "done", "cancelled")
EPIC_STATES = MILESTONE_STATES
STATES_BY_KIND: dict[str, tuple[str, ...]] = {
    ItemKind.MILESTONE: MILESTONE_STATES,
    ItemKind.EPIC: EPIC_STATES,
    ItemKind.TICKET: TICKET_STATES,
}
RESOLVED_STATES = ("done", "cancelled")
ALL_STATES = tuple(dict.fromkeys(TICKET_STATES + MILESTONE_STATES))


class Priority(models.TextChoices):
    """How soon a ticket matters; runnable tickets are listed by it, then by number."""

    URGENT = "urgent"
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


# A priority's rank, urgent first: what lists sort by.
PRIORITY_RANK: dict[str, int] = {priority: rank for rank, priority in enumerate(Priority.values)}
MAX_LABELS = 10


class Item(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="items")
    kind = models.CharField(max_length=20, choices=ItemKind.choices)
    number = models.PositiveIntegerField()
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    acceptance_criteria = models.JSONField(default=list, blank=True)
    state = models.CharField(max_length=20, choices=[(s, s) for s in ALL_STATES])
    epic = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="epic_tickets",
        limit_choices_to={"kind": ItemKind.EPIC},
    )
    milestone = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="milestone_items",
        limit_choices_to={"kind": ItemKind.MILESTONE},
    )
    priority = models.CharField(max_length=10, choices=Priority.choices, default=Priority.NORMAL)
    # Names from the project's [tracker] labels, sorted, at most MAX_LABELS.
    labels = models.JSONField(default=list, blank=True)
    policy = models.JSONField(default=dict, blank=True)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["project__key", "number"]
        constraints = [
            models.UniqueConstraint(fields=["project", "number"], name="item_number_unique"),
        ]
        indexes = [models.Index(fields=["project", "kind", "state"])]

    def __str__(self) -> str:
        return f"{self.key} {self.title}"

    @property
    def key(self) -> str:
        return f"{self.project.key}-{self.number}"


class Dependency(models.Model):
    """``blocker`` must be resolved before ``blocked`` can run."""

    blocker = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="blocking")
    blocked = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="blocked_by")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "dependencies"
        constraints = [
            models.UniqueConstraint(fields=["blocker", "blocked"], name="dependency_unique"),
            models.CheckConstraint(
                condition=~models.Q(blocker=models.F("blocked")), name="dependency_not_self"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.blocker.key} → {self.blocked.key}"
