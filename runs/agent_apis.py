"""The agents' REST surface (DESIGN §5), authenticated by host token only.

A host sees and touches only its own runs: every lookup is filtered by ``request.auth``.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hosts.authentication import HostTokenAuthentication, IsHostAgent
from hosts.models import GpuHost
from runs import services, uploads
from runs.models import Run
from specportal.api.errors import ApplicationError
from specportal.api.query import query_clean
from specportal.api.schema import errors
from specportal.protocol import LoadLevel, Progress, ProtocolError, RunSpec, Workload, limits
from specportal.protocol.engine_report import PHASES
from specportal.protocol.runspec import RunArm, RunConfiguration, RunExperiment, RunHost


def run_spec(run: Run) -> dict[str, Any]:
    """What an agent needs to execute a run (``RunSpec``); nothing about other runs or hosts."""
    experiment = run.experiment
    # A calibrate_draft_cost run serves its arm's draft model alone, in the arm's place.
    config = run.draft_alone_configuration or run.arm.configuration
    workload = next(w for w in experiment.workloads if w["name"] == run.workload)
    load = next(x for x in experiment.loads if x["name"] == run.load)
    return RunSpec(
        id=run.pk,
        attempt=run.attempt,
        status=run.status,  # type: ignore[arg-type]  # Run.Status values are RunStatus
        cancel_requested=run.cancel_requested,
        lease_seconds=services.lease_seconds(),
        experiment=RunExperiment(
            id=experiment.pk,
            name=experiment.name,
            cache_policy=experiment.cache_policy,  # type: ignore[arg-type]
            warmup_requests=experiment.warmup_requests,
        ),
        host=RunHost(
            name=run.host.name,
            mode=run.host.mode,  # type: ignore[arg-type]
            base_url=run.host.base_url,
            emulated=run.host.emulated,
        ),
        arm=RunArm(label=run.arm.label, position=run.arm.position),
        configuration=RunConfiguration(
            id=config.pk,
            name=config.name,
            config_hash=config.config_hash,
            engine=config.engine,  # type: ignore[arg-type]
            method=config.method,
            document=config.document,
        ),
        # Checked when the experiment was created; read again so the agent gets every key.
        workload=Workload.from_dict(workload, path="workload"),
        load=LoadLevel.from_dict(load, path="load"),
        # A calibrate_draft_cost run (repetition 0: no repetition of its arm) sends the workload
        # of the first repetition.
        repetition=run.repetition or 1,
        sequence=run.sequence,
        # The objectives' per-request SLOs (schema 2): the load generator measures goodput and
        # slo_attainment against them.
        slos={
            key: float(value)
            for key, value in ((experiment.objectives or {}).get("slos") or {}).items()
        },
    ).to_dict()


RUN_SPEC_OUTPUT = inline_serializer(
    "AgentRunSpec",
    {
        "schema": serializers.CharField(),
        "schema_version": serializers.IntegerField(),
        "id": serializers.IntegerField(),
        "attempt": serializers.IntegerField(),
        "status": serializers.CharField(),
        "cancel_requested": serializers.BooleanField(),
        "lease_seconds": serializers.IntegerField(),
        "experiment": serializers.DictField(),
        "host": serializers.DictField(),
        "arm": serializers.DictField(),
        "configuration": serializers.DictField(),
        "workload": serializers.DictField(),
        "load": serializers.DictField(),
        "repetition": serializers.IntegerField(),
        "sequence": serializers.IntegerField(),
        "slos": serializers.DictField(child=serializers.FloatField()),
    },
)


class _AgentApi(APIView):
    authentication_classes = (HostTokenAuthentication,)
    permission_classes = (IsHostAgent,)

    def host(self, request: Request) -> GpuHost:
        assert isinstance(request.auth, GpuHost)
        return request.auth

    def own_run(self, request: Request, run_id: int) -> Run:
        queryset = Run.objects.select_related("experiment", "arm__configuration", "host")
        return get_object_or_404(queryset, pk=run_id, host=self.host(request))


class AgentRunApi(_AgentApi):
    @extend_schema(operation_id="agent_run_retrieve", responses=RUN_SPEC_OUTPUT)
    def get(self, request: Request, run_id: int) -> Response:
        return Response(run_spec(self.own_run(request, run_id)))


class AgentRunClaimApi(_AgentApi):
    class AgentClaimInputSerializer(serializers.Serializer[Any]):
        attempt = serializers.IntegerField(min_value=1, max_value=limits.INT4_MAX)

    @extend_schema(
        operation_id="agent_run_claim",
        request=AgentClaimInputSerializer,
        responses=RUN_SPEC_OUTPUT,
        description="Conditional: 409 if another attempt holds the run.",
    )
    # Agents of a newer version may send keys this portal does not know yet: ignored.
    @errors(open_body=True)
    def post(self, request: Request, run_id: int) -> Response:
        data = self.AgentClaimInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        self.own_run(request, run_id)  # 404 for another host's run, before any 409
        services.run_claim(host=self.host(request), run_id=run_id, **data.validated_data)
        return Response(run_spec(self.own_run(request, run_id)))


class AgentHeartbeatCurrentRunSerializer(serializers.Serializer[Any]):
    """The run the agent is executing: ids are bigint, attempts integer (a string or a larger
    number would fail in the lease's UPDATE). Attempt 0 is an agent that does not know it yet:
    it renews nothing."""

    id = serializers.IntegerField(min_value=1, max_value=limits.INT8_MAX)
    attempt = serializers.IntegerField(min_value=0, max_value=limits.INT4_MAX)


class AgentHeartbeatApi(_AgentApi):
    class AgentHeartbeatInputSerializer(serializers.Serializer[Any]):
        inventory = serializers.DictField(required=False, default=dict)
        current_run = AgentHeartbeatCurrentRunSerializer(
            required=False, allow_null=True, default=None
        )

    @extend_schema(
        operation_id="agent_heartbeat",
        request=AgentHeartbeatInputSerializer,
        responses=inline_serializer(
            "AgentHeartbeatAnswer",
            {
                "lease_seconds": serializers.IntegerField(),
                "cancel_requested": serializers.BooleanField(),
                "held": serializers.BooleanField(required=False),
            },
        ),
    )
    # Agents of a newer version may send keys this portal does not know yet: ignored.
    @errors(without=(409,), open_body=True)  # a report, never refused for a run's state
    def post(self, request: Request) -> Response:
        data = self.AgentHeartbeatInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        answer = services.run_heartbeat(host=self.host(request), **data.validated_data)
        return Response(answer)


class AgentRunProgressApi(_AgentApi):
    class AgentProgressInputSerializer(serializers.Serializer[Any]):
        """For the schema only: the body is read by ``specportal.protocol.Progress``."""

        schema = serializers.CharField(required=False)
        schema_version = serializers.IntegerField(required=False)
        attempt = serializers.IntegerField(min_value=1)
        phase = serializers.ChoiceField(PHASES)
        engine = serializers.DictField(required=False)
        details = serializers.DictField(required=False, default=dict)

    @extend_schema(
        operation_id="agent_run_progress",
        request=AgentProgressInputSerializer,
        responses=inline_serializer(
            "AgentProgressAnswer",
            {"cancel_requested": serializers.BooleanField(), "status": serializers.CharField()},
        ),
    )
    # Agents of a newer version may send keys this portal does not know yet: ignored.
    @errors(open_body=True)
    def post(self, request: Request, run_id: int) -> Response:
        try:
            progress = Progress.from_dict(request.data)
        except ProtocolError as exc:
            raise ApplicationError(str(exc), fields=exc.fields) from None
        self.own_run(request, run_id)
        run = services.run_progress(host=self.host(request), run_id=run_id, progress=progress)
        return Response({"cancel_requested": run.cancel_requested, "status": run.status})


class ResultQuery(serializers.Serializer[Any]):
    attempt = serializers.IntegerField(min_value=1, max_value=2**31 - 1)


class AgentRunResultApi(_AgentApi):
    """PUT ``?attempt=N`` with the gzip'd result envelope as the body (idempotent per attempt)."""

    @extend_schema(
        operation_id="agent_run_result",
        parameters=[ResultQuery],
        request={"application/json": OpenApiTypes.BINARY},
        responses=inline_serializer(
            "AgentResultStored",
            {
                "run": serializers.IntegerField(),
                "attempt": serializers.IntegerField(),
                "sha256": serializers.CharField(),
                "stored": serializers.BooleanField(),
            },
        ),
        description=(
            "The result envelope as JSON with Content-Encoding: gzip. Checked whole before it is "
            "acknowledged: a bad one is a 400 (code invalid_result, fields naming the place, e.g. "
            "result.requests.12.index) and fails the run; 409 if the host no longer holds the "
            "attempt."
        ),
    )
    def put(self, request: Request, run_id: int) -> Response:
        attempt = query_clean(request, ResultQuery)["attempt"]
        self.own_run(request, run_id)
        cap = uploads.max_upload_bytes()
        too_large = ApplicationError(
            f"The result upload is larger than {cap} bytes (SPECPORTAL_RESULT_UPLOAD_MAX_BYTES).",
            code="too_large",
            fields={"body": [f"at most {cap} bytes"]},
            status_code=413,
        )
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        if declared > cap:  # refused before a byte of it is read
            services.run_result_too_large(
                host=self.host(request), run_id=run_id, attempt=attempt, limit=cap
            )
            raise too_large
        # The stream itself, never request.body: the upload goes to a temporary file as it
        # comes (Django's request.body would hold it whole, and refuse it past
        # DATA_UPLOAD_MAX_MEMORY_SIZE).
        try:
            body = uploads.ReceivedBody.spooled(request._request, max_bytes=cap)  # type: ignore[arg-type]  # HttpRequest.read is the WSGI stream's
        except uploads.BodyTooLarge:
            services.run_result_too_large(
                host=self.host(request), run_id=run_id, attempt=attempt, limit=cap
            )
            raise too_large from None
        with body.file:
            upload = services.run_result_receive(
                host=self.host(request), run_id=run_id, attempt=attempt, body=body
            )
        return Response(
            {"run": run_id, "attempt": upload.attempt, "sha256": upload.sha256, "stored": True}
        )
