"""Browser pages of the tracker."""

urlpatterns: list = []
