"""Django app configuration for the tracker."""

from django.apps import AppConfig


class TrackerConfig(AppConfig):
    name = "tracker"
    verbose_name = "Tracker"
