"""Django app configuration for the tracker."""

from django.apps import AppConfig


class TrackerConfig(AppConfig):
    name = "tracker"
    verbose_name = "Tracker"

    def ready(self) -> None:
        from ballet.metrics import state_collector_register  # noqa: PLC0415
        from tracker.metrics import WorkCollector  # noqa: PLC0415

        # /metrics counts claims and reports; ballet/ imports none of the apps it configures.
        state_collector_register(WorkCollector())
