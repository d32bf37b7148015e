"""Django app configuration for the knowledge base."""

from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = "Knowledge"

    def ready(self) -> None:
        from knowledge.search import SOURCE
        from tracker.search.indexing import search_source_register

        search_source_register(SOURCE)
