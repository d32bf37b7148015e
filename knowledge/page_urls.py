"""Browser pages of the knowledge base."""

from django.urls import URLPattern, path

from knowledge import pages

urlpatterns: list[URLPattern] = [
    path("projects/<str:key>/knowledge/", pages.knowledge_list_page, name="knowledge-list"),
    path(
        "projects/<str:key>/knowledge/<int:entry_id>/",
        pages.knowledge_entry_page,
        name="knowledge-entry",
    ),
]
