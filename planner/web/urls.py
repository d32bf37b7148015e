"""REST routes of the planner under /api/v1/."""

from django.urls import path, re_path

from planner.web.apis import (
    ProjectUsageApi,
    SessionDetailApi,
    SessionEditApi,
    SessionListApi,
    SessionMessageApi,
    SessionReplyApi,
    SessionRetryApi,
    SessionStopApi,
    SessionUsageApi,
)
from planner.web.brief_api import ItemBriefApi
from planner.web.draft_apis import DraftDiscardApi, DraftListApi, DraftPublishApi
from planner.web.event_apis import EventListApi, EventStreamApi
from planner.web.inbox_apis import InboxApi, InboxDismissApi
from planner.web.question_apis import (
    QuestionAnswerApi,
    QuestionConfirmApi,
    QuestionDetailApi,
    QuestionListApi,
    QuestionWithdrawApi,
)

app_name = "planner-api"

SESSION = r"planner/sessions/(?P<session>[0-9a-fA-F-]{32,36})"
DRAFT = SESSION + r"/drafts/(?P<draft>[0-9]{1,18})"

urlpatterns = [
    path("planner/sessions/", SessionListApi.as_view(), name="session-list"),
    # The seed's exact path: no trailing slash needed.
    re_path(SESSION + r"/?$", SessionDetailApi.as_view(), name="session-detail"),
    re_path(SESSION + r"/messages/$", SessionMessageApi.as_view(), name="session-messages"),
    re_path(SESSION + r"/stop/$", SessionStopApi.as_view(), name="session-stop"),
    re_path(SESSION + r"/retry/$", SessionRetryApi.as_view(), name="session-retry"),
    re_path(SESSION + r"/edit/$", SessionEditApi.as_view(), name="session-edit"),
    re_path(SESSION + r"/answers/$", SessionReplyApi.as_view(), name="session-answers"),
    re_path(SESSION + r"/usage/$", SessionUsageApi.as_view(), name="session-usage"),
    re_path(SESSION + r"/drafts/$", DraftListApi.as_view(), name="session-drafts"),
    re_path(DRAFT + r"/publish/$", DraftPublishApi.as_view(), name="draft-publish"),
    re_path(DRAFT + r"/discard/$", DraftDiscardApi.as_view(), name="draft-discard"),
    path("projects/<str:key>/questions/", QuestionListApi.as_view(), name="question-list"),
    path("projects/<str:key>/questions/<str:question>/", QuestionDetailApi.as_view(), name="question-detail"),
    path(
        "projects/<str:key>/questions/<str:question>/answer/",
        QuestionAnswerApi.as_view(),
        name="question-answer",
    ),
    path(
        "projects/<str:key>/questions/<str:question>/confirm/",
        QuestionConfirmApi.as_view(),
        name="question-confirm",
    ),
    path(
        "projects/<str:key>/questions/<str:question>/withdraw/",
        QuestionWithdrawApi.as_view(),
        name="question-withdraw",
    ),
    path("projects/<str:key>/events/", EventListApi.as_view(), name="event-list"),
    path("projects/<str:key>/events/stream/", EventStreamApi.as_view(), name="event-stream"),
    path("projects/<str:key>/usage/", ProjectUsageApi.as_view(), name="project-usage"),
    path("inbox/", InboxApi.as_view(), name="inbox"),
    path("inbox/<str:entry>/dismiss/", InboxDismissApi.as_view(), name="inbox-dismiss"),
    path("projects/<str:key>/items/<str:item_key>/brief/", ItemBriefApi.as_view(), name="item-brief"),
]
