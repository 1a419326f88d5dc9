from django.contrib import admin
from django.urls import include, path, re_path

from accounts.errors import json_not_found
from accounts.views import RedocDocsPage, SchemaApi, SwaggerDocsPage

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/schema/", SchemaApi.as_view(), name="api-schema"),
    path("api/v1/docs/", SwaggerDocsPage.as_view(url_name="api-schema"), name="api-docs"),
    path("api/v1/redoc/", RedocDocsPage.as_view(url_name="api-schema"), name="api-redoc"),
    path("api/v1/", include("accounts.urls")),
    path("api/v1/", include("runs.api_urls")),
    path("", include("experiments.urls")),
    path("", include("runs.urls")),
    # Last: anything else under /api/ is a 404 in the one error shape, with DEBUG on or off
    # (Django's handler404 only applies with DEBUG off, and renders HTML).
    re_path(r"^api/", json_not_found),
]
