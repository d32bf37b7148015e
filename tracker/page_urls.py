"""Browser pages of the tracker."""

from django.urls import URLPattern, path

from tracker import pages

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
