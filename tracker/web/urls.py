"""REST routes of the tracker under /api/v1/."""

from django.urls import path

from tracker.web.apis.auth import AuthTokenApi
from tracker.web.apis.changesets import (
    ChangesetApplyApi,
    ChangesetDetailApi,
    ChangesetImpactApi,
    ChangesetListApi,
    ChangesetRejectApi,
)
from tracker.web.apis.comments import CommentListApi, WatchApi
from tracker.web.apis.items import ItemDetailApi, ItemListApi, RunnableListApi
from tracker.web.apis.keys import KeyDetailApi, KeyListApi, ProjectKeyDetailApi, ProjectKeyListApi
from tracker.web.apis.members import (
    AgentListApi,
    InvitationAcceptApi,
    InvitationDeclineApi,
    InvitationDetailApi,
    InvitationListApi,
)
from tracker.web.apis.projects import MemberDetailApi, MemberListApi, ProjectDetailApi, ProjectListApi
from tracker.web.apis.repositories import RepositoryDetailApi, RepositoryFetchApi, RepositoryListApi
from tracker.web.apis.search import ProjectSearchApi
from tracker.web.apis.skills import SkillDetailApi, SkillListApi
from tracker.web.apis.webhooks import (
    WebhookDeliveryListApi,
    WebhookDetailApi,
    WebhookListApi,
    WebhookPingApi,
    WebhookRedeliverApi,
)
from tracker.web.apis.work import ClaimDetailApi, ClaimListApi, ClaimReleaseApi, ClaimReportsApi, ClaimTakeApi

app_name = "tracker-api"

PROJECT = "projects/<str:key>/"
CHANGESET = PROJECT + "changesets/<int:number>/"
CLAIM = PROJECT + "claims/<str:claim_id>/"
WEBHOOK = PROJECT + "webhooks/<int:webhook_id>/"
REPOSITORY = PROJECT + "repositories/<int:repository_id>/"

urlpatterns = [
    # Scripts exchange a username and password for their API token.
    path("auth/token/", AuthTokenApi.as_view(), name="auth-token"),
    path("projects/", ProjectListApi.as_view(), name="project-list"),
    path(PROJECT, ProjectDetailApi.as_view(), name="project-detail"),
    path(PROJECT + "members/", MemberListApi.as_view(), name="member-list"),
    path(PROJECT + "members/<str:username>/", MemberDetailApi.as_view(), name="member-detail"),
    # Nobody joins without accepting (docs/api-keys.md#agents): invitations and agents.
    path(PROJECT + "invitations/", InvitationListApi.as_view(), name="invitation-list"),
    path(
        PROJECT + "invitations/<int:invitation_id>/", InvitationDetailApi.as_view(), name="invitation-detail"
    ),
    path("invitations/<int:invitation_id>/accept/", InvitationAcceptApi.as_view(), name="invitation-accept"),
    path(
        "invitations/<int:invitation_id>/decline/", InvitationDeclineApi.as_view(), name="invitation-decline"
    ),
    path(PROJECT + "agents/", AgentListApi.as_view(), name="agent-list"),
    path(PROJECT + "items/", ItemListApi.as_view(), name="item-list"),
    path(PROJECT + "items/<str:item_key>/", ItemDetailApi.as_view(), name="item-detail"),
    path(PROJECT + "runnable/", RunnableListApi.as_view(), name="runnable-list"),
    # Talk around an item (docs/domain.md#people): comments with mentions, watching.
    path(PROJECT + "items/<str:item_key>/comments/", CommentListApi.as_view(), name="item-comments"),
    path(PROJECT + "items/<str:item_key>/watch/", WatchApi.as_view(), name="item-watch"),
    # Work (docs/domain.md#work): claims on tickets, heartbeats, reports, release.
    path(PROJECT + "items/<str:item_key>/claim/", ClaimTakeApi.as_view(), name="item-claim"),
    path(PROJECT + "claims/", ClaimListApi.as_view(), name="claim-list"),
    path(CLAIM, ClaimDetailApi.as_view(), name="claim-detail"),
    path(CLAIM + "reports/", ClaimReportsApi.as_view(), name="claim-reports"),
    path(CLAIM + "release/", ClaimReleaseApi.as_view(), name="claim-release"),
    path(PROJECT + "changesets/", ChangesetListApi.as_view(), name="changeset-list"),
    path(CHANGESET, ChangesetDetailApi.as_view(), name="changeset-detail"),
    path(CHANGESET + "impact/", ChangesetImpactApi.as_view(), name="changeset-impact"),
    path(CHANGESET + "apply/", ChangesetApplyApi.as_view(), name="changeset-apply"),
    path(CHANGESET + "reject/", ChangesetRejectApi.as_view(), name="changeset-reject"),
    path(PROJECT + "skills/", SkillListApi.as_view(), name="skill-list"),
    path(PROJECT + "skills/<str:name>/", SkillDetailApi.as_view(), name="skill-detail"),
    path(PROJECT + "search/", ProjectSearchApi.as_view(), name="project-search"),
    path("keys/", KeyListApi.as_view(), name="key-list"),
    path("keys/<int:key_id>/", KeyDetailApi.as_view(), name="key-detail"),
    path(PROJECT + "keys/", ProjectKeyListApi.as_view(), name="project-key-list"),
    path(PROJECT + "keys/<int:key_id>/", ProjectKeyDetailApi.as_view(), name="project-key-detail"),
    # Webhooks (docs/events.md#webhooks): owners only.
    path(PROJECT + "webhooks/", WebhookListApi.as_view(), name="webhook-list"),
    path(WEBHOOK, WebhookDetailApi.as_view(), name="webhook-detail"),
    path(WEBHOOK + "deliveries/", WebhookDeliveryListApi.as_view(), name="webhook-deliveries"),
    path(
        WEBHOOK + "deliveries/<int:delivery_id>/redeliver/",
        WebhookRedeliverApi.as_view(),
        name="webhook-redeliver",
    ),
    path(WEBHOOK + "ping/", WebhookPingApi.as_view(), name="webhook-ping"),
    # Linked repositories (SPEC § 16): readers see them, owners link, change, unlink and fetch.
    path(PROJECT + "repositories/", RepositoryListApi.as_view(), name="repository-list"),
    path(REPOSITORY, RepositoryDetailApi.as_view(), name="repository-detail"),
    path(REPOSITORY + "fetch/", RepositoryFetchApi.as_view(), name="repository-fetch"),
]
