"""REST routes of the planner under /api/v1/."""

from django.urls import path, re_path

from planner.apis import ProjectUsageApi, SessionDetailApi, SessionListApi, SessionMessageApi, SessionStopApi

app_name = "planner-api"

SESSION = r"planner/sessions/(?P<session>[0-9a-fA-F-]{32,36})"

urlpatterns = [
    path("planner/sessions/", SessionListApi.as_view(), name="session-list"),
    # The seed's exact path: no trailing slash needed.
    re_path(SESSION + r"/?$", SessionDetailApi.as_view(), name="session-detail"),
    re_path(SESSION + r"/messages/$", SessionMessageApi.as_view(), name="session-messages"),
    re_path(SESSION + r"/stop/$", SessionStopApi.as_view(), name="session-stop"),
    path("projects/<str:key>/usage/", ProjectUsageApi.as_view(), name="project-usage"),
]
