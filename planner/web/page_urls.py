"""Browser pages of the planner: a project's chats, a chat, and the planner's settings."""

from django.urls import URLPattern, path

from planner.web import inbox_pages, pages, settings_pages

urlpatterns: list[URLPattern] = [
    path("inbox/", inbox_pages.inbox, name="planner-inbox"),
    path("inbox/stream/", inbox_pages.inbox_stream, name="planner-inbox-stream"),
    path("inbox/<str:entry>/dismiss/", inbox_pages.inbox_dismiss_page, name="planner-inbox-dismiss"),
    path("projects/<str:key>/chat/", pages.chat_list, name="planner-chat-list"),
    path("projects/<str:key>/chat/<uuid:session>/", pages.chat, name="planner-chat"),
    path(
        "projects/<str:key>/chat/<uuid:session>/answer/",
        pages.question_answer,
        name="planner-question-answer",
    ),
    path(
        "projects/<str:key>/chat/<uuid:session>/confirm/",
        pages.question_confirm_page,
        name="planner-question-confirm",
    ),
    path(
        "projects/<str:key>/chat/<uuid:session>/unarchive/",
        pages.chat_unarchive,
        name="planner-chat-unarchive",
    ),
    path("projects/<str:key>/refs/", pages.refs, name="planner-refs"),
    path("projects/<str:key>/settings/", settings_pages.project_settings, name="planner-project-settings"),
]
