"""Django app configuration for the planner."""

from django.apps import AppConfig


class PlannerConfig(AppConfig):
    name = "planner"
    verbose_name = "Planner"
