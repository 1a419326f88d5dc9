"""``GET /api/v1/audit/events/``: the audit trail, filtered, newest first (managers only)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import roles
from accounts.selectors import user_has_role
from audit import selectors
from specportal.api.query import query_clean


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


class AuditFilters(serializers.Serializer[Any]):
    actor = serializers.CharField(required=False, max_length=200, help_text="who (user name)")
    action = serializers.CharField(required=False, max_length=200, help_text="a prefix")
    object_type = serializers.CharField(required=False, max_length=100)
    object_id = serializers.CharField(required=False, max_length=100)
    since = serializers.DateField(required=False, help_text="first day (inclusive)")
    until = serializers.DateField(required=False, help_text="last day (inclusive)")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=1000, default=200)


class AuditEventListApi(APIView):
    permission_classes = (IsManager,)

    @extend_schema(
        operation_id="audit_events_list",
        parameters=[AuditFilters],
        responses=AuditEventOutput(many=True),
    )
    def get(self, request: Request) -> Response:
        filters = query_clean(request, AuditFilters)
        limit = filters.pop("limit")
        events = selectors.event_list(filters=filters)[:limit]
        return Response(AuditEventOutput(events, many=True).data)
