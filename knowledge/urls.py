"""REST routes of the knowledge base under /api/v1/."""

from django.urls import path

from knowledge.apis import KnowledgeDetailApi, KnowledgeListApi

app_name = "knowledge-api"

urlpatterns = [
    path("knowledge/", KnowledgeListApi.as_view(), name="knowledge-list"),
    path("knowledge/<int:entry_id>/", KnowledgeDetailApi.as_view(), name="knowledge-detail"),
]
