"""REST API for runs (users): lists, one run, its summary and records, cancel — thin views."""

from __future__ import annotations

from typing import Any, Final

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import StreamingHttpResponse
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
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
from specportal.api.query import Choice, object_id, query_clean
from specportal.api.schema import errors

MAX_PAGE: Final = 1000
DEFAULT_PAGE: Final = 100


class RunOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    experiment = serializers.IntegerField(source="experiment_id")
    sequence = serializers.IntegerField()
    arm = serializers.CharField(source="arm.label")
    host = serializers.CharField(source="host.name", allow_null=True, default=None)
    host_emulated = serializers.BooleanField(source="host.emulated", allow_null=True, default=None)
    workload = serializers.CharField()
    load = serializers.CharField()
    repetition = serializers.IntegerField()
    position = serializers.IntegerField()
    estimated_seconds = serializers.FloatField()
    status = serializers.CharField()
    attempt = serializers.IntegerField()
    cancel_requested = serializers.BooleanField()
    queued_at = serializers.DateTimeField(allow_null=True)
    claimed_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField()
    progress = serializers.JSONField()
    requests_total = serializers.IntegerField(allow_null=True)
    requests_failed = serializers.IntegerField(allow_null=True)
    # Fraction of prompt tokens served from the prefix cache; null when the engine did not say.
    prefix_cache_hit_fraction = serializers.FloatField(allow_null=True)
    prefix_cache_source = serializers.CharField(source="prefix_cache.source", allow_null=True)
    # Imported runs (import-mode experiments): the file's format and tool; "" when measured.
    imported = serializers.BooleanField()
    imported_label = serializers.CharField()
    source_format = serializers.CharField()
    source_tool = serializers.CharField()
    source_tool_version = serializers.CharField()
    source_sha256 = serializers.CharField()


class RunDetailOutput(RunOutput):
    engine_report = serializers.JSONField()
    engine_checked = serializers.JSONField()
    mismatches = serializers.JSONField()
    engine_env = serializers.JSONField()
    command = serializers.JSONField()
    log_excerpt = serializers.CharField()
    summary = serializers.JSONField(allow_null=True)  # null until the result is ingested
    prefix_cache = serializers.JSONField()
    result_attempt = serializers.IntegerField(allow_null=True)


class RunFilters(serializers.Serializer[Any]):
    experiment = object_id(required=False)
    status = Choice(Run.Status.values, required=False)
    host = serializers.CharField(required=False, max_length=200, help_text="host name")
    arm = serializers.CharField(required=False, max_length=200, help_text="arm label")
    workload = serializers.CharField(required=False, max_length=200)
    load = serializers.CharField(required=False, max_length=200)
    repetition = serializers.IntegerField(required=False, min_value=1, max_value=2**31 - 1)


class RunListApi(APIView):
    @extend_schema(
        operation_id="runs_list",
        parameters=[RunFilters],
        responses=RunOutput(many=True),
        description=f"In execution order; at most {MAX_PAGE} runs.",
    )
    def get(self, request: Request) -> Response:
        # A misspelt filter, or a value no run can have, would list every run or none.
        filters = query_clean(request, RunFilters)
        page = list(selectors.run_list(filters=filters)[:MAX_PAGE])
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
    # Tokens of scope submit may call it (CI); see accounts.authentication.
    token_scope = "submit"

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
        after = serializers.IntegerField(min_value=-1, max_value=2**31 - 1, default=-1)
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
        query = query_clean(request, self.QuerySerializer)
        run = selectors.run_get(run_id=run_id)
        rows = selectors.request_records_page(run=run, **query)
        after = rows[-1]["index"] if len(rows) == query["limit"] else None
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


IMPORT_MAX_BYTES: Final = 512 * 1024**2
READ_CHUNK: Final = 1 << 20

ImportedOutput = inline_serializer(
    "ImportedRuns",
    {
        "runs": RunOutput(many=True),
        "created": serializers.ListField(child=serializers.BooleanField()),
        "from": serializers.ListField(child=serializers.CharField()),
    },
)


class ImportQuery(serializers.Serializer[Any]):
    experiment = object_id(help_text="the import-mode experiment to fill")
    arm = serializers.CharField(
        required=False,
        max_length=200,
        help_text="arm label (needed when the experiment has several)",
    )
    cell = serializers.CharField(
        required=False,
        max_length=401,
        help_text="WORKLOAD/LOAD; default: the load level the "
        "file's max_concurrency / request_rate describe",
    )
    repetition = serializers.IntegerField(
        required=False, min_value=1, max_value=2**31 - 1, help_text="default: the next free"
    )
    filename = serializers.CharField(
        required=False, max_length=255, help_text="named in error paths"
    )


class ImportApi(APIView):
    """Other tools' result files into an import-mode experiment (validated whole first)."""

    # Tokens of scope submit may call it (CI); see accounts.authentication.
    token_scope = "submit"

    permission_classes = (IsExperimenterOrReadOnly,)

    @extend_schema(
        operation_id="imports_create",
        parameters=[ImportQuery],
        request={"application/json": OpenApiTypes.BINARY, "application/gzip": OpenApiTypes.BINARY,
                 "multipart/form-data": OpenApiTypes.BINARY},
        responses={201: ImportedOutput, 200: ImportedOutput},
        description="The body is one result file (SpecPortal's own, `vllm bench serve`, SGLang "
        "`bench_serving`, GuideLLM, AIPerf; JSON, JSON Lines or gzip), or multipart with several "
        "`file` parts (AIPerf's aggregate JSON with its per-request JSONL). Every file is read "
        "whole and every run checked before anything is written: a bad file, line or field, an "
        "unknown layout or a model other than the arm's is a 400 naming it, and nothing is "
        "saved. Idempotent by the file's SHA-256: the same file again answers 200 with the runs "
        "it made (so no Idempotency-Key is needed).",
        examples=[OpenApiExample("imported", response_only=True, status_codes=["201"], value={
            "runs": [{"id": 41, "arm": "baseline", "workload": "chat", "load": "c4",
                      "repetition": 1, "status": "done", "imported": True,
                      "imported_label": "imported from vllm bench serve: not measured by "
                      "SpecPortal", "source_format": "vllm-bench-serve"}],
            "created": [True], "from": ["file.result.json.run 0"]})],
    )  # fmt: skip
    @errors(404)  # the experiment named by ?experiment=
    def post(self, request: Request) -> Response:
        from runs.imports import run_import

        query = query_clean(request, ImportQuery)
        files = _uploaded_files(request, query.get("filename"))
        imported = run_import(experiment_id=query["experiment"], files=files,
                              arm=query.get("arm"), cell=query.get("cell"),
                              repetition=query.get("repetition"))  # fmt: skip
        created = [i.created for i in imported]
        body = {"runs": RunOutput([i.run for i in imported], many=True).data, "created": created,
                "from": [i.file for i in imported]}  # fmt: skip
        return Response(body, status=201 if any(created) else 200)


def _uploaded_files(request: Request, filename: str | None) -> list[tuple[str, bytes]]:
    django_request = request._request
    if (request.content_type or "").startswith("multipart/form-data"):
        try:
            parts = django_request.FILES.getlist("file")
        except RequestDataTooBig:
            # Form fields (not files) past DATA_UPLOAD_MAX_MEMORY_SIZE: Django's own refusal,
            # which would otherwise reach the client as a 400 page (or a 500 under DRF).
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            raise ApplicationError("The form's fields are too large.", code="too_large",
                                   status_code=413,
                                   fields={"body": [f"form fields over {limit} bytes"]}) from None  # fmt: skip
        except MultiPartParserError as exc:  # no boundary, a truncated part, …
            raise ApplicationError(f"The multipart body is malformed: {exc}", code="malformed",
                                   fields={"body": [str(exc)]}) from None  # fmt: skip
        if not parts:
            raise ApplicationError("No file part.", fields={"file": ["one or more 'file' parts"]})
        out = []
        for part in parts:
            if (part.size or 0) > IMPORT_MAX_BYTES:
                raise ApplicationError("The file is too large.", status_code=413,
                                       fields={f"file.{part.name}": [f"over {IMPORT_MAX_BYTES} bytes"]})  # fmt: skip
            out.append((str(part.name), part.read()))
        return out
    # Read the stream ourselves: request.body refuses anything above DATA_UPLOAD_MAX_MEMORY_SIZE.
    body = bytearray()
    while chunk := django_request.read(READ_CHUNK):
        body += chunk
        if len(body) > IMPORT_MAX_BYTES:
            raise ApplicationError("The file is too large.", status_code=413,
                                   fields={"body": [f"over {IMPORT_MAX_BYTES} bytes"]})  # fmt: skip
    if not body:
        raise ApplicationError("The body is empty.", fields={"body": ["a result file"]})
    return [(filename or "upload", bytes(body))]
