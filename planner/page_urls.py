"""Browser pages of the planner: a project's chats and a chat."""

from django.urls import URLPattern, path

from planner import pages

urlpatterns: list[URLPattern] = [
    path("projects/<str:key>/chat/", pages.chat_list, name="planner-chat-list"),
    path("projects/<str:key>/chat/<uuid:session>/", pages.chat, name="planner-chat"),
    path(
        "projects/<str:key>/chat/<uuid:session>/answer/",
        pages.question_answer,
        name="planner-question-answer",
    ),
    path(
        "projects/<str:key>/chat/<uuid:session>/unarchive/",
        pages.chat_unarchive,
        name="planner-chat-unarchive",
    ),
    path("projects/<str:key>/refs/", pages.refs, name="planner-refs"),
]
