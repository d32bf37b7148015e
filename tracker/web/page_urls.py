"""Browser pages of the tracker: home, API keys, the plan and its items, the dependency graph."""

from django.urls import URLPattern, path

from tracker.web import (
    code_pages,
    comment_pages,
    graph_pages,
    item_actions,
    member_pages,
    notify_pages,
    pages,
    plan_pages,
    repository_pages,
    review_pages,
    webhook_pages,
)

urlpatterns: list[URLPattern] = [
    path("", pages.home, name="home"),
    path("keys/", pages.keys, name="keys"),
    # E-mail settings and the link of every mail that stops a kind (tracker/web/notify_pages.py).
    path("notifications/", notify_pages.notify_settings_page, name="notify-settings"),
    path(
        "notifications/unsubscribe/<str:token>/",
        notify_pages.unsubscribe_page,
        name="notify-unsubscribe",
    ),
    path("keys/<int:key_id>/revoke/", pages.key_revoke_page, name="key-revoke"),
    path(
        "projects/<str:key>/keys/<int:key_id>/revoke/",
        pages.project_key_revoke_page,
        name="project-key-revoke",
    ),
    # Members, invitations and agents (tracker/web/member_pages.py).
    path("projects/<str:key>/members/", member_pages.members_page, name="members"),
    path("projects/<str:key>/members/invite/", member_pages.member_invite_page, name="member-invite"),
    path("projects/<str:key>/members/role/", member_pages.member_role_page, name="member-role"),
    path("projects/<str:key>/members/remove/", member_pages.member_remove_page, name="member-remove"),
    path(
        "projects/<str:key>/invitations/<int:invitation_id>/cancel/",
        member_pages.invitation_cancel_page,
        name="invitation-cancel",
    ),
    path("projects/<str:key>/agents/", member_pages.agent_create_page, name="agent-create"),
    path(
        "projects/<str:key>/agents/keys/<int:key_id>/revoke/",
        member_pages.agent_key_revoke_page,
        name="agent-key-revoke",
    ),
    path(
        "invitations/<int:invitation_id>/accept/",
        member_pages.invitation_accept_page,
        name="invitation-accept",
    ),
    path(
        "invitations/<int:invitation_id>/decline/",
        member_pages.invitation_decline_page,
        name="invitation-decline",
    ),
    # Linked repositories (tracker/web/repository_pages.py): owners only.
    path("projects/<str:key>/repositories/", repository_pages.repositories_page, name="repositories"),
    path(
        "projects/<str:key>/repositories/link/", repository_pages.repository_link_page, name="repository-link"
    ),
    path(
        "projects/<str:key>/repositories/<int:repository_id>/fetch/",
        repository_pages.repository_fetch_page,
        name="repository-fetch",
    ),
    path(
        "projects/<str:key>/repositories/<int:repository_id>/unlink/",
        repository_pages.repository_unlink_page,
        name="repository-unlink",
    ),
    # A commit and a file of a linked repository (tracker/web/code_pages.py): the project's readers.
    path("projects/<str:key>/code/<slug:repo>/commit/<str:sha>/", code_pages.commit_page, name="code-commit"),
    path(
        "projects/<str:key>/code/<slug:repo>/file/<str:ref>/<path:path>",
        code_pages.file_page,
        name="code-file",
    ),
    # Webhooks (tracker/web/webhook_pages.py): owners only.
    path("projects/<str:key>/webhooks/", webhook_pages.webhooks_page, name="webhooks"),
    path("projects/<str:key>/webhooks/new/", webhook_pages.webhook_create_page, name="webhook-create"),
    path("projects/<str:key>/webhooks/<int:webhook_id>/", webhook_pages.webhook_page, name="webhook"),
    path(
        "projects/<str:key>/webhooks/<int:webhook_id>/edit/",
        webhook_pages.webhook_update_page,
        name="webhook-update",
    ),
    path(
        "projects/<str:key>/webhooks/<int:webhook_id>/enabled/",
        webhook_pages.webhook_enabled_page,
        name="webhook-enabled",
    ),
    path(
        "projects/<str:key>/webhooks/<int:webhook_id>/delete/",
        webhook_pages.webhook_delete_page,
        name="webhook-delete",
    ),
    path(
        "projects/<str:key>/webhooks/<int:webhook_id>/ping/",
        webhook_pages.webhook_ping_page,
        name="webhook-ping",
    ),
    path(
        "projects/<str:key>/webhooks/<int:webhook_id>/deliveries/<int:delivery_id>/redeliver/",
        webhook_pages.webhook_redeliver_page,
        name="webhook-redeliver",
    ),
    path("projects/<str:key>/", plan_pages.plan, name="plan"),
    # Before the item's page: "new" is no item key.
    path("projects/<str:key>/items/new/", item_actions.item_new_page, name="item-new"),
    path("projects/<str:key>/items/<str:item_key>/", plan_pages.item_page, name="item"),
    path("projects/<str:key>/items/<str:item_key>/edit/", item_actions.item_edit_page, name="item-edit"),
    path("projects/<str:key>/items/<str:item_key>/move/", item_actions.item_move_page, name="item-move"),
    path(
        "projects/<str:key>/items/<str:item_key>/blockers/",
        item_actions.item_blockers_page,
        name="item-blockers",
    ),
    path("projects/<str:key>/items/<str:item_key>/claim/", item_actions.item_claim_page, name="item-claim"),
    path(
        "projects/<str:key>/items/<str:item_key>/release/",
        item_actions.item_release_page,
        name="item-release",
    ),
    path(
        "projects/<str:key>/items/<str:item_key>/comments/", comment_pages.comment_page, name="item-comment"
    ),
    path("projects/<str:key>/items/<str:item_key>/watch/", comment_pages.watch_page, name="item-watch"),
    path("projects/<str:key>/graph.svg", graph_pages.plan_graph, name="plan-graph"),
    path("projects/<str:key>/changesets/", review_pages.changeset_list_page, name="changeset-list"),
    path(
        "projects/<str:key>/changesets/<int:number>/",
        review_pages.changeset_review_page,
        name="changeset-review",
    ),
    path(
        "projects/<str:key>/changesets/<int:number>/decide/",
        review_pages.changeset_decide_page,
        name="changeset-decide",
    ),
]
