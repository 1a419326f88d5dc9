import plotly
from django.contrib import admin
from django.urls import include, path, re_path

from specportal.api.docs import RedocDocsPage, SchemaApi, SwaggerDocsPage
from specportal.api.errors import json_not_found
from specportal.views import home, plotly_js

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/schema/", SchemaApi.as_view(), name="api-schema"),
    path("api/v1/docs/", SwaggerDocsPage.as_view(url_name="api-schema"), name="api-docs"),
    path("api/v1/redoc/", RedocDocsPage.as_view(url_name="api-schema"), name="api-redoc"),
    path("", include("accounts.urls")),
    # Each app's urls.py holds its API (under api/v1/) and its pages, with their full paths.
    path("", include("configurations.urls")),
    path("", include("hosts.urls")),
    path("", include("experiments.urls")),
    path("", include("runs.urls")),
    path("", include("notifications.urls")),
    path("", include("verdicts.urls")),
    path("", include("approvals.urls")),
    path("", include("audit.urls")),
    path("", home, name="home"),
    path(f"assets/plotly-{plotly.__version__}.min.js", plotly_js, name="plotly-js"),
    # Last: anything else under /api/ is a 404 in the one error shape, with DEBUG on or off
    # (Django's handler404 only applies with DEBUG off, and renders HTML).
    re_path(r"^api/", json_not_found),
]
