"""Browser pages of the tracker."""

from django.urls import URLPattern, path

from tracker import pages, review_pages

urlpatterns: list[URLPattern] = [
    path("", pages.home, name="home"),
    path("keys/", pages.keys, name="keys"),
    path("keys/<int:key_id>/revoke/", pages.key_revoke_page, name="key-revoke"),
    path(
        "projects/<str:key>/keys/<int:key_id>/revoke/",
        pages.project_key_revoke_page,
        name="project-key-revoke",
    ),
]

urlpatterns += [
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
