"""Django app configuration for the tracker."""

from django.apps import AppConfig


class TrackerConfig(AppConfig):
    name = "tracker"
    verbose_name = "Tracker"

    def ready(self) -> None:
        from tracker.search.documents import SOURCES
        from tracker.search.indexing import search_source_register

        for source in SOURCES:
            search_source_register(source)
