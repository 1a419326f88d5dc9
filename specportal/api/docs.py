"""The OpenAPI schema and the offline docs pages (Swagger UI, Redoc), errors in the one shape."""

from __future__ import annotations

from typing import Any

from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


class _ErrorsAsJson(APIView):
    """The schema and docs views negotiate YAML or HTML; their 4xx still use the one JSON shape."""

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        if response.status_code >= 400:
            response.accepted_renderer = JSONRenderer()
            response.accepted_media_type = "application/json"
            response.content_type = None
        return response


class SchemaApi(_ErrorsAsJson, SpectacularAPIView):
    pass


class SwaggerDocsPage(_ErrorsAsJson, SpectacularSwaggerView):
    pass


class RedocDocsPage(_ErrorsAsJson, SpectacularRedocView):
    pass
