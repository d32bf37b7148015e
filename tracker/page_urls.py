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

from tracker import graph_pages  # noqa: E402 - beside its route, so parallel additions merge cleanly

urlpatterns += [path("projects/<str:key>/graph.svg", graph_pages.plan_graph, name="plan-graph")]
