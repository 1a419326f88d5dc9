from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
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
