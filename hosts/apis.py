"""REST API for GPU hosts (``/api/v1/hosts/``).

Permissions: any role reads; operators register, change and delete hosts and issue or revoke
their tokens (the token endpoint needs the operator role even to read).
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import IsOperator, IsOperatorOrReadOnly
from hosts import selectors, services
from hosts.models import GpuHost
from specportal.api.errors import ApplicationError
from specportal.api.idempotency import idempotent
from specportal.api.input import LabelsField, refuse_unknown_fields
from specportal.api.query import Choice, Flag, query_clean
from specportal.api.secrets import mask_credentials


class HostOutput(serializers.ModelSerializer[GpuHost]):
    class Meta:
        model = GpuHost
        fields = (
            "name",
            "mode",
            "base_url",
            "gpu_model",
            "gpu_count",
            "gpu_memory_gb",
            "driver_version",
            "cuda_version",
            "engines",
            "labels",
            "offline",
            "emulated",
            "health_status",
            "health_detail",
            "last_heartbeat_at",
            "inventory",
            "inventory_reported_at",
            "has_token",
            "token_prefix",
            "token_issued_at",
            "queue_name",
            "created_at",
        )

    def to_representation(self, instance: GpuHost) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        # An endpoint's address (and an error naming it) may carry credentials; every viewer
        # reads this list.
        for key in ("base_url", "health_detail"):
            if isinstance(data.get(key), str):
                data[key] = mask_credentials(data[key])
        return data


class HostInput(serializers.Serializer[Any]):
    name = serializers.RegexField(r"^[a-z0-9-]+$", max_length=63)
    mode = serializers.ChoiceField(choices=GpuHost.Mode.choices, required=False)
    base_url = serializers.URLField(required=False, allow_blank=True)
    gpu_model = serializers.CharField(max_length=100, required=False, allow_blank=True)
    gpu_count = serializers.IntegerField(min_value=0, max_value=4096, required=False)
    gpu_memory_gb = serializers.FloatField(
        min_value=0, max_value=100_000, required=False, allow_null=True
    )
    driver_version = serializers.CharField(max_length=64, required=False, allow_blank=True)
    cuda_version = serializers.CharField(max_length=64, required=False, allow_blank=True)
    engines = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()), required=False
    )
    labels = LabelsField(required=False)
    offline = serializers.BooleanField(required=False)
    emulated = serializers.BooleanField(required=False)


HOST_INPUT_FIELDS = tuple(HostInput().fields)


class HostFilters(serializers.Serializer[Any]):
    emulated = Flag(required=False, help_text="only emulated hosts (true) or only real (false)")
    mode = Choice(GpuHost.Mode.values, required=False)


class HostListApi(APIView):
    permission_classes = (IsOperatorOrReadOnly,)

    @extend_schema(
        parameters=[HostFilters], operation_id="hosts_list", responses=HostOutput(many=True)
    )
    def get(self, request: Request) -> Response:
        filters = query_clean(request, HostFilters)
        hosts = selectors.host_list(emulated=filters.get("emulated"), mode=filters.get("mode"))
        return Response(HostOutput(hosts, many=True).data)

    @extend_schema(request=HostInput, responses={201: HostOutput})
    @idempotent
    def post(self, request: Request) -> Response:
        refuse_unknown_fields(request.data, HOST_INPUT_FIELDS)
        serializer = HostInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        host = services.host_register(**serializer.validated_data)
        return Response(HostOutput(host).data, status=status.HTTP_201_CREATED)


class HostDetailApi(APIView):
    permission_classes = (IsOperatorOrReadOnly,)

    @extend_schema(responses=HostOutput)
    def get(self, request: Request, name: str) -> Response:
        return Response(HostOutput(get_object_or_404(GpuHost, name=name)).data)

    @extend_schema(request=HostInput(partial=True), responses=HostOutput)
    @idempotent
    def patch(self, request: Request, name: str) -> Response:
        host = get_object_or_404(GpuHost, name=name)
        allowed = tuple(f for f in HOST_INPUT_FIELDS if f != "name")
        if isinstance(request.data, dict) and "name" in request.data:
            raise ApplicationError(
                "A host keeps its name (its queue and its agent are named after it).",
                fields={"name": ["cannot be changed: register a new host instead"]},
            )
        refuse_unknown_fields(request.data, allowed)
        serializer = HostInput(data={**request.data, "name": host.name}, partial=True)
        serializer.is_valid(raise_exception=True)
        fields = {k: v for k, v in serializer.validated_data.items() if k != "name"}
        host = services.host_update(host=host, **fields)
        return Response(HostOutput(host).data)

    @extend_schema(request=None, responses={204: None})
    @idempotent
    def delete(self, request: Request, name: str) -> Response:
        services.host_delete(host=get_object_or_404(GpuHost, name=name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class HostTokenApi(APIView):
    """Issue (POST) or revoke (DELETE) the host's agent token. The token is shown once."""

    permission_classes = (IsOperator,)

    @extend_schema(
        request=None,
        responses={
            201: inline_serializer(
                "HostTokenIssued",
                {
                    "host": serializers.CharField(),
                    "token": serializers.CharField(),
                    "header": serializers.CharField(),
                },
            )
        },
    )
    # Not @idempotent: a replay would have to keep the token in clear; issuing again is safe.
    def post(self, request: Request, name: str) -> Response:
        host = get_object_or_404(GpuHost, name=name)
        token = services.host_token_issue(host=host)
        return Response(
            {"host": host.name, "token": token, "header": f"Authorization: Host {token}"},
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(request=None, responses={204: None})
    @idempotent
    def delete(self, request: Request, name: str) -> Response:
        services.host_token_revoke(host=get_object_or_404(GpuHost, name=name))
        return Response(status=status.HTTP_204_NO_CONTENT)
