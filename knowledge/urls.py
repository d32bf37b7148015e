"""REST routes of the knowledge base under /api/v1/."""

urlpatterns: list = []
