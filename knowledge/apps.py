"""Django app configuration for the knowledge base."""

from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = "Knowledge"

    def ready(self) -> None:
        from knowledge.selectors import knowledge_events_visible  # noqa: PLC0415 - models are ready now
        from tracker.activity.filters import activity_filter_register  # noqa: PLC0415

        # The activity log is the tracker's; which of its knowledge events a reader sees is ours.
        activity_filter_register(verb_prefix="knowledge.", visible=knowledge_events_visible)
