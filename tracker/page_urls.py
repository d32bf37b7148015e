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

# The plan and its items (tracker/plan_pages.py).
from tracker import plan_pages  # noqa: E402 - appended with its routes

urlpatterns += [
    path("projects/<str:key>/", plan_pages.plan, name="plan"),
    path("projects/<str:key>/items/<str:item_key>/", plan_pages.item_page, name="item"),
]
