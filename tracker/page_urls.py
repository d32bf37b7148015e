"""Browser pages of the tracker."""

from django.urls import URLPattern, path

from tracker import pages

urlpatterns: list[URLPattern] = [
    path("", pages.home, name="home"),
]
