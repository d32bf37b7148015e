"""The URL map: pages, admin, REST API, OpenAPI, health and metrics."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from ballet.api_docs import RedocDocsPage, SwaggerDocsPage
from ballet.api_root import ApiRootApi
from ballet.metrics import metrics_view
from ballet.views import favicon, healthz

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", ApiRootApi.as_view(), name="api-root"),
    path("api/v1/", include("tracker.web.urls")),
    path("api/v1/", include("knowledge.urls")),
    path("api/v1/", include("planner.web.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/schema/docs/", SwaggerDocsPage.as_view(url_name="schema"), name="schema-docs"),
    path("api/schema/redoc/", RedocDocsPage.as_view(url_name="schema"), name="schema-redoc"),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    # Browsers ask for /favicon.ico on every page that names no icon (the admin's, the API docs).
    path("favicon.ico", favicon, name="favicon"),
    path("", include("planner.web.page_urls")),
    path("", include("tracker.web.page_urls")),
    path("", include("knowledge.page_urls")),
]

handler400 = "ballet.errors.bad_request"
handler404 = "ballet.errors.not_found"
handler500 = "ballet.errors.server_error"
