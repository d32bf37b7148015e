"""WebSocket routes of the planner."""

from django.urls import re_path

from planner.web.consumers import PlannerSessionConsumer

UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

websocket_urlpatterns = [
    re_path(rf"^ws/planner/sessions/(?P<session>{UUID})/$", PlannerSessionConsumer.as_asgi()),
]
