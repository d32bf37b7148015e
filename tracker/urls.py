"""REST routes of the tracker under /api/v1/."""

urlpatterns: list = []
