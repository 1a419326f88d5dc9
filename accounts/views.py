from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import roles
from accounts.selectors import user_has_role


class WhoAmIApi(APIView):
    """The caller's user name and roles (a cheap way for CI to check its token)."""

    @extend_schema(
        responses=inline_serializer(
            "WhoAmI",
            {"username": serializers.CharField(), "roles": serializers.ListField()},
        )
    )
    def get(self, request: Request) -> Response:
        user = request.user
        held = [role for role in roles.ALL_ROLES if user_has_role(user, role)]
        return Response({"username": user.get_username(), "roles": held})


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
