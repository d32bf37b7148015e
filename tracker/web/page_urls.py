"""Browser pages of the tracker: home, API keys, the plan and its items, the dependency graph."""

from django.urls import URLPattern, path

from tracker.web import graph_pages, pages, plan_pages, review_pages

urlpatterns: list[URLPattern] = [
    path("", pages.home, name="home"),
    path("keys/", pages.keys, name="keys"),
    path("keys/<int:key_id>/revoke/", pages.key_revoke_page, name="key-revoke"),
    path(
        "projects/<str:key>/keys/<int:key_id>/revoke/",
        pages.project_key_revoke_page,
        name="project-key-revoke",
    ),
    path("projects/<str:key>/", plan_pages.plan, name="plan"),
    path("projects/<str:key>/items/<str:item_key>/", plan_pages.item_page, name="item"),
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
