"""REST API for runs (users): lists, one run, its summary and records, cancel — thin views."""

from __future__ import annotations

from typing import Any, Final

from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import IsExperimenterOrReadOnly
from runs import selectors, services
from runs.models import Run
from specportal.api.errors import ApplicationError
from specportal.api.idempotency import idempotent
from specportal.api.input import refuse_unknown_filters

MAX_PAGE: Final = 1000
DEFAULT_PAGE: Final = 100


class RunOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    experiment = serializers.IntegerField(source="experiment_id")
    sequence = serializers.IntegerField()
    arm = serializers.CharField(source="arm.label")
    host = serializers.CharField(source="host.name")
    host_emulated = serializers.BooleanField(source="host.emulated")
    workload = serializers.CharField()
    load = serializers.CharField()
    repetition = serializers.IntegerField()
    position = serializers.IntegerField()
    estimated_seconds = serializers.FloatField()
    status = serializers.CharField()
    attempt = serializers.IntegerField()
    cancel_requested = serializers.BooleanField()
    queued_at = serializers.DateTimeField()
    claimed_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField()
    error = serializers.CharField()
    progress = serializers.JSONField()
    requests_total = serializers.IntegerField()
    requests_failed = serializers.IntegerField()
    # Fraction of prompt tokens served from the prefix cache; null when the engine did not say.
    prefix_cache_hit_fraction = serializers.FloatField(allow_null=True)
    prefix_cache_source = serializers.CharField(source="prefix_cache.source", allow_null=True)


class RunDetailOutput(RunOutput):
    engine_report = serializers.JSONField()
    engine_checked = serializers.JSONField()
    mismatches = serializers.JSONField()
    engine_env = serializers.JSONField()
    command = serializers.JSONField()
    log_excerpt = serializers.CharField()
    summary = serializers.JSONField()
    prefix_cache = serializers.JSONField()
    result_attempt = serializers.IntegerField()


RUN_FILTER_PARAMETERS = [
    OpenApiParameter("experiment", int),
    OpenApiParameter("status", str, enum=[value for value, _ in Run.Status.choices]),
    OpenApiParameter("host", str, description="host name"),
    OpenApiParameter("arm", str, description="arm label"),
    OpenApiParameter("workload", str),
    OpenApiParameter("load", str),
    OpenApiParameter("repetition", int),
]


class RunListApi(APIView):
    @extend_schema(
        operation_id="runs_list",
        parameters=RUN_FILTER_PARAMETERS,
        responses=RunOutput(many=True),
        description=f"In execution order; at most {MAX_PAGE} runs.",
    )
    def get(self, request: Request) -> Response:
        # A misspelt filter would list every run as if it matched.
        refuse_unknown_filters(request, selectors.RUN_FILTERS)
        try:
            runs = selectors.run_list(filters=request.query_params)
            page = list(runs[:MAX_PAGE])
        except ValueError as exc:
            raise ApplicationError("Invalid filter.", fields={"query": [str(exc)]}) from exc
        return Response(RunOutput(page, many=True).data)


class RunDetailApi(APIView):
    @extend_schema(operation_id="runs_retrieve", responses=RunDetailOutput)
    def get(self, request: Request, run_id: int) -> Response:
        return Response(RunDetailOutput(selectors.run_get(run_id=run_id)).data)


class RunSummaryApi(APIView):
    @extend_schema(
        operation_id="runs_summary_retrieve",
        responses=inline_serializer(
            "RunSummary",
            {
                "run": serializers.IntegerField(),
                "status": serializers.CharField(),
                "summary": serializers.JSONField(),
            },
        ),
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = selectors.run_get(run_id=run_id)
        return Response({"run": run.pk, "status": run.status, "summary": run.summary})


class RunCancelApi(APIView):
    permission_classes = (IsExperimenterOrReadOnly,)

    @extend_schema(operation_id="runs_cancel", request=None, responses=RunDetailOutput)
    @idempotent
    def post(self, request: Request, run_id: int) -> Response:
        run = get_object_or_404(Run, pk=run_id)
        services.run_cancel(run=run)
        return Response(RunDetailOutput(selectors.run_get(run_id=run_id)).data)


class RunRequestsApi(APIView):
    """Per-request records, keyset-paginated: ``?after=<index>&limit=<n>``; ``next`` continues."""

    class QuerySerializer(serializers.Serializer[Any]):
        after = serializers.IntegerField(min_value=-1, default=-1)
        limit = serializers.IntegerField(min_value=1, max_value=MAX_PAGE, default=DEFAULT_PAGE)

    @extend_schema(
        operation_id="runs_requests_list",
        parameters=[QuerySerializer],
        responses=inline_serializer(
            "RunRequestsPage",
            {
                "results": serializers.ListField(child=serializers.DictField()),
                "next_after": serializers.IntegerField(allow_null=True),
            },
        ),
    )
    def get(self, request: Request, run_id: int) -> Response:
        refuse_unknown_filters(request, tuple(self.QuerySerializer().fields))
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        run = selectors.run_get(run_id=run_id)
        rows = selectors.request_records_page(run=run, **query.validated_data)
        after = rows[-1]["index"] if len(rows) == query.validated_data["limit"] else None
        return Response({"results": rows, "next_after": after})


class RunRequestsDownloadApi(APIView):
    """Every record as JSON lines, streamed (no page size, no memory spike)."""

    @extend_schema(
        operation_id="runs_requests_download",
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(
                OpenApiTypes.STR, description="one JSON object per line"
            )
        },
    )
    def get(self, request: Request, run_id: int) -> StreamingHttpResponse:
        run = selectors.run_get(run_id=run_id)
        response = StreamingHttpResponse(
            selectors.request_records_jsonl(run=run), content_type="application/x-ndjson"
        )
        response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-requests.jsonl"'
        return response
