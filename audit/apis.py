"""``GET /api/v1/audit/events/``: the audit trail, filtered, newest first (managers only)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import roles
from accounts.selectors import user_has_role
from audit import selectors
from specportal.api.input import refuse_unknown_filters


class IsManager(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user_has_role(user, roles.MANAGER))


class AuditEventOutput(serializers.Serializer[Any]):
    seq = serializers.IntegerField()
    occurred_at = serializers.DateTimeField()
    actor_kind = serializers.CharField()
    actor_name = serializers.CharField()
    actor_token = serializers.CharField()
    action = serializers.CharField()
    object_type = serializers.CharField()
    object_id = serializers.CharField()
    object_repr = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)
    request_id = serializers.CharField()
    source_address = serializers.CharField(allow_null=True)
    prev_hash = serializers.CharField()
    hash = serializers.CharField()


class AuditEventListApi(APIView):
    permission_classes = (IsManager,)

    @extend_schema(
        operation_id="audit_events_list",
        parameters=[OpenApiParameter(name, str) for name in (*selectors.FILTERS, "limit")],
        responses=AuditEventOutput(many=True),
    )
    def get(self, request: Request) -> Response:
        refuse_unknown_filters(request, (*selectors.FILTERS, "limit"))
        try:
            limit = max(1, min(1000, int(request.query_params.get("limit", "200"))))
        except ValueError:
            limit = 200
        events = selectors.event_list(filters=request.query_params.dict())[:limit]
        return Response(AuditEventOutput(events, many=True).data)
