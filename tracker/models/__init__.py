"""The tracker's models, one module per concept."""

from tracker.models.access import Membership, Organization, Project, Role
from tracker.models.activity import ActivityEvent
from tracker.models.changesets import Changeset, ChangesetStatus
from tracker.models.events import (
    DeliveryStatus,
    Event,
    Webhook,
    WebhookAttempt,
    WebhookDelivery,
    WebhookFormat,
)
from tracker.models.keys import Agent, ApiKey, Scope
from tracker.models.notifications import Mail, MailStatus, NotificationPreference, NotifyKind, NotifyMode
from tracker.models.people import Comment, Dismissal, Invitation, InvitationStatus, Notice, Watch
from tracker.models.plan import (
    EPIC_STATES,
    MILESTONE_STATES,
    STATES_BY_KIND,
    TICKET_STATES,
    Dependency,
    Item,
    ItemKind,
    Priority,
)
from tracker.models.repositories import Repository
from tracker.models.search import SearchDocument, SearchHead
from tracker.models.skills import Skill, SkillPin, SkillScope, SkillVersion
from tracker.models.work import CLAIM_OUTCOMES, Claim, ClaimStatus, Report, ReportKind, Sweep

__all__ = [
    "CLAIM_OUTCOMES",
    "EPIC_STATES",
    "MILESTONE_STATES",
    "STATES_BY_KIND",
    "TICKET_STATES",
    "ActivityEvent",
    "Agent",
    "ApiKey",
    "Changeset",
    "ChangesetStatus",
    "Claim",
    "ClaimStatus",
    "Comment",
    "DeliveryStatus",
    "Dependency",
    "Dismissal",
    "Event",
    "Invitation",
    "InvitationStatus",
    "Item",
    "ItemKind",
    "Mail",
    "MailStatus",
    "Membership",
    "Notice",
    "NotificationPreference",
    "NotifyKind",
    "NotifyMode",
    "Organization",
    "Priority",
    "Project",
    "Report",
    "ReportKind",
    "Repository",
    "Role",
    "Scope",
    "SearchDocument",
    "SearchHead",
    "Skill",
    "SkillPin",
    "SkillScope",
    "SkillVersion",
    "Sweep",
    "Watch",
    "Webhook",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookFormat",
]
