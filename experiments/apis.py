"""REST API for experiments (users) — thin: parse, call a service, serialize."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import (
    OpenApiExample,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import IsExperimenterOrReadOnly
from analysis.objectives import objectives_hash
from analysis.prefixcache import PREFIX_CACHE_TOLERANCE
from experiments import selectors, services
from experiments.models import Experiment
from experiments.planning import estimated_wall_seconds
from experiments.services import CONTEXT_KEYS
from hosts.models import GpuHost
from runs.apis import RunOutput
from runs.selectors import run_list
from specportal.api.idempotency import idempotent
from specportal.api.input import NameField, refuse_unknown_fields
from specportal.api.query import Choice, query_clean
from specportal.api.schema import errors
from specportal.protocol import limits

VERDICT_SUMMARY = inline_serializer(
    "ExperimentVerdictSummary",
    {
        "verdict_id": serializers.IntegerField(),
        "supersedes": serializers.IntegerField(allow_null=True),
        "computed_at": serializers.CharField(),
        "analysis_version": serializers.CharField(),
        "objectives_sha256": serializers.CharField(),
        "emulated_label": serializers.CharField(allow_null=True),
        "candidates": serializers.ListField(child=serializers.DictField()),
        "url": serializers.CharField(),
    },
    allow_null=True,
)
FAMILY_PLAN = inline_serializer(
    "ExperimentFamilyPlan",
    {
        "family_size": serializers.IntegerField(),
        "alpha": serializers.FloatField(),
        "min_repetitions": serializers.IntegerField(allow_null=True),
        "repetitions": serializers.IntegerField(),
        "can_decide": serializers.BooleanField(),
        "reason": serializers.CharField(),
    },
)


class ArmOutput(serializers.Serializer[Any]):
    label = serializers.CharField()  # type: ignore[assignment]
    position = serializers.IntegerField()
    configuration = serializers.IntegerField(source="configuration_id")
    config_hash = serializers.CharField(source="configuration.config_hash")
    method = serializers.CharField(source="configuration.method")
    engine = serializers.CharField(source="configuration.engine")


class ExperimentOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()
    status = serializers.CharField()
    arms = ArmOutput(many=True)
    hosts = serializers.SerializerMethodField()
    workloads = serializers.JSONField()
    loads = serializers.JSONField()
    repetitions = serializers.IntegerField()
    warmup_requests = serializers.IntegerField()
    cache_policy = serializers.CharField()
    failure_policy = serializers.CharField()
    max_failed_runs = serializers.IntegerField()
    calibrate_draft_cost = serializers.BooleanField()
    objectives = serializers.JSONField()
    objectives_hash = serializers.CharField()
    mode = serializers.CharField()
    context = serializers.JSONField()  # type: ignore[assignment]
    locked_at = serializers.DateTimeField(allow_null=True)
    arms_difference_reason = serializers.CharField()
    arms_differences = serializers.JSONField()
    lint_override_reason = serializers.CharField()
    lint_findings = serializers.JSONField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    verdict = serializers.SerializerMethodField()

    def get_hosts(self, experiment: Experiment) -> list[str]:
        return sorted(host.name for host in experiment.hosts.all())

    @extend_schema_field(VERDICT_SUMMARY)
    def get_verdict(self, experiment: Experiment) -> dict[str, Any] | None:
        """The latest verdict's states (the whole document: ``.../verdict/``)."""
        # verdicts reads experiments; experiments reaches back only here, when serializing.
        from verdicts.selectors import verdict_summary

        return verdict_summary(experiment=experiment)


PLAN_OUTPUT = inline_serializer(
    "ExperimentPlan",
    {
        "experiment": serializers.IntegerField(),
        "estimated_seconds": serializers.FloatField(),
        "family": FAMILY_PLAN,
        "runs": RunOutput(many=True),
    },
)


# The CI context's fields (equality) and the mode.
ExperimentFilters = type(
    "ExperimentFilters",
    (serializers.Serializer,),
    {
        **{
            key: serializers.CharField(
                required=False, max_length=500, help_text=f"context.{key} equals"
            )
            for key in CONTEXT_KEYS
        },
        "mode": Choice(Experiment.Mode.values, required=False),
    },
)


class ExperimentListApi(APIView):
    # Tokens of scope submit may call it (CI); see accounts.authentication.
    token_scope = "submit"

    permission_classes = (IsExperimenterOrReadOnly,)

    class ExperimentCreateInputSerializer(serializers.Serializer[Any]):
        name = NameField(max_length=200)
        description = serializers.CharField(required=False, allow_blank=True, default="")
        # A stored id, or {"document": {...}} / {"import_command": "..."}, stored by content.
        baseline = serializers.JSONField()
        candidates = serializers.ListField(child=serializers.JSONField(), min_length=1)
        mode = serializers.ChoiceField(Experiment.Mode.choices, default=Experiment.Mode.MEASURED)
        context = serializers.DictField(required=False, default=dict)  # type: ignore[assignment]
        labels = serializers.ListField(child=NameField(max_length=64), required=False)
        workloads = serializers.ListField(child=serializers.DictField())
        loads = serializers.ListField(
            child=serializers.DictField(),
            help_text="Load levels; `requests` at most "
            f"{settings.SPECPORTAL_MAX_REQUESTS_PER_LOAD} (SPECPORTAL_MAX_REQUESTS_PER_LOAD).",
        )
        objectives = serializers.DictField()
        hosts = serializers.SlugRelatedField(
            slug_field="name",
            queryset=GpuHost.objects.all(),
            many=True,
            required=False,
            default=list,
        )
        repetitions = serializers.IntegerField(
            min_value=1,
            max_value=settings.SPECPORTAL_MAX_REPETITIONS,
            default=3,
            error_messages={
                "min_value": services.repetitions_message(),
                "max_value": services.repetitions_message(),
            },
        )
        warmup_requests = serializers.IntegerField(
            min_value=0, max_value=limits.MAX_WARMUP_REQUESTS, default=0
        )
        cache_policy = serializers.ChoiceField(
            Experiment.CachePolicy.choices, default=Experiment.CachePolicy.FRESH_SERVER
        )
        failure_policy = serializers.ChoiceField(
            Experiment.FailurePolicy.choices, default=Experiment.FailurePolicy.CONTINUE
        )
        max_failed_runs = serializers.IntegerField(
            min_value=0, max_value=limits.INT4_MAX, default=0
        )
        # Per cell, one more run per candidate serving its draft model alone (measured cost c);
        # refused for candidates without a standalone draft model (EAGLE heads, MTP, n-gram).
        calibrate_draft_cost = serializers.BooleanField(default=False)
        arms_difference_reason = serializers.CharField(required=False, allow_blank=True, default="")

    @extend_schema(
        operation_id="experiments_list",
        responses=ExperimentOutput(many=True),
        parameters=[ExperimentFilters],
    )
    def get(self, request: Request) -> Response:
        filters = query_clean(request, ExperimentFilters)
        mode = filters.pop("mode", None)
        experiments = selectors.experiment_list(context=filters, mode=mode)[:200]
        return Response(ExperimentOutput(experiments, many=True).data)

    @extend_schema(
        operation_id="experiments_create",
        request=ExperimentCreateInputSerializer,
        responses={201: ExperimentOutput},
        description="One document creates an experiment: arms as stored configuration ids or "
        "inline ({\"document\": {...}} or {\"import_command\": \"vllm serve ...\"}; stored by content, "
        "an identical document reuses the stored configuration), workloads, loads, repetitions, "
        "hosts, objectives, a CI `context` (repository, commit, branch, pull_request, job_url), "
        "and `mode` (`import`: cells filled by POST /api/v1/imports/, no hosts needed). "
        + services.caps_description(),
        examples=[OpenApiExample("from CI", request_only=True, value={
            "name": "eagle3 vs baseline, PR 812", "baseline": 3,
            "candidates": [{"document": {"schema": 1, "engine": "vllm", "engine_build": {
                "version": "0.30.0"}, "target": {"model": "Qwen/Qwen3-8B"}, "proposal": {
                "method": "eagle3", "model": "org/eagle3-head", "num_speculative_tokens": 3}},
                "name": "eagle3-k3"}],
            "labels": ["baseline", "eagle3"],
            "workloads": [{"name": "chat", "dataset_name": "bundled", "category": "chat"}],
            "loads": [{"name": "c1", "concurrency": 1, "requests": 200},
                      {"name": "c32", "concurrency": 32, "requests": 2000}],
            "repetitions": 5, "hosts": ["gpu-a"],
            "objectives": {"schema": 1, "objectives": [{"metric": "output_throughput",
                "statistic": "value", "per": "run", "aggregate": "median", "op": ">=",
                "threshold": 1.0, "scope": "relative"}]},
            "context": {"repository": "github.com/acme/serving", "commit": "9f1c2ab",
                        "branch": "eagle3", "pull_request": "812",
                        "job_url": "https://ci.acme.dev/jobs/5521"}})],
    )  # fmt: skip
    @idempotent
    def post(self, request: Request) -> Response:
        # A misspelt optional key (``nmae``, ``warmup``) would silently take its default.
        refuse_unknown_fields(request.data, tuple(self.ExperimentCreateInputSerializer().fields))
        data = self.ExperimentCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        values["baseline"], values["candidates"] = services.experiment_arms_resolve(
            user=request.user, baseline=values["baseline"], candidates=values["candidates"]
        )
        experiment = services.experiment_create(user=request.user, **values)
        experiment = selectors.experiment_get(experiment_id=experiment.pk)
        return Response(ExperimentOutput(experiment).data, status=status.HTTP_201_CREATED)


class ExperimentDetailApi(APIView):
    @extend_schema(operation_id="experiments_retrieve", responses=ExperimentOutput)
    def get(self, request: Request, experiment_id: int) -> Response:
        experiment = selectors.experiment_get(experiment_id=experiment_id)
        return Response(ExperimentOutput(experiment).data)


class CellArmOutput(serializers.Serializer[Any]):
    arm = serializers.CharField()
    runs = serializers.IntegerField()
    figures = serializers.DictField(child=serializers.FloatField(allow_null=True))
    prefix_cache_hit_fractions = serializers.ListField(
        child=serializers.FloatField(allow_null=True)
    )


class PrefixCacheBlockOutput(serializers.Serializer[Any]):
    repetition = serializers.IntegerField()
    hit_fractions = serializers.DictField(child=serializers.FloatField(allow_null=True))
    flagged = serializers.BooleanField()
    reasons = serializers.ListField(child=serializers.CharField())


class CellPrefixCacheOutput(serializers.Serializer[Any]):
    flagged = serializers.BooleanField()
    reasons = serializers.ListField(child=serializers.CharField())
    blocks = PrefixCacheBlockOutput(many=True)


class CellOutput(serializers.Serializer[Any]):
    cell = serializers.CharField()
    arms = CellArmOutput(many=True)
    prefix_cache = CellPrefixCacheOutput()


class ExperimentCellsApi(APIView):
    """Each cell's arms side by side: median figures, prefix-cache hit fractions and the flag."""

    @extend_schema(
        operation_id="experiments_cells_retrieve",
        responses=inline_serializer(
            "ExperimentCells",
            {
                "experiment": serializers.IntegerField(),
                "prefix_cache_tolerance": serializers.FloatField(),
                "cells": CellOutput(many=True),
            },
        ),
    )
    def get(self, request: Request, experiment_id: int) -> Response:
        experiment = selectors.experiment_get(experiment_id=experiment_id)
        cells = selectors.experiment_cells(experiment=experiment)
        return Response(
            {
                "experiment": experiment.pk,
                "prefix_cache_tolerance": PREFIX_CACHE_TOLERANCE,
                "cells": CellOutput(cells, many=True).data,
            }
        )


class ExperimentPlanApi(APIView):
    """POST: (re)plan before start. GET: the plan in execution order with estimated durations."""

    # Tokens of scope submit may call it (CI); see accounts.authentication.
    token_scope = "submit"

    permission_classes = (IsExperimenterOrReadOnly,)

    @extend_schema(operation_id="experiments_plan_retrieve", responses=PLAN_OUTPUT)
    def get(self, request: Request, experiment_id: int) -> Response:
        experiment = selectors.experiment_get(experiment_id=experiment_id)
        return Response(_plan_body(experiment))

    @extend_schema(operation_id="experiments_plan_create", request=None, responses=PLAN_OUTPUT)
    @idempotent
    def post(self, request: Request, experiment_id: int) -> Response:
        experiment = selectors.experiment_get(experiment_id=experiment_id)
        services.experiment_plan(experiment=experiment)
        return Response(_plan_body(experiment))


def _plan_body(experiment: Experiment) -> dict[str, Any]:
    runs = list(run_list(filters={"experiment": str(experiment.pk)}))
    return {
        "experiment": experiment.pk,
        "estimated_seconds": estimated_wall_seconds(runs),
        "family": selectors.experiment_family(experiment=experiment),
        "runs": RunOutput(runs, many=True).data,
    }


class ExperimentStartApi(APIView):
    # Tokens of scope submit may call it (CI); see accounts.authentication.
    token_scope = "submit"

    permission_classes = (IsExperimenterOrReadOnly,)

    class ExperimentStartInputSerializer(serializers.Serializer[Any]):
        lint_override_reason = serializers.CharField(required=False, allow_blank=True, default="")

    @extend_schema(
        operation_id="experiments_start",
        request=ExperimentStartInputSerializer,
        responses=ExperimentOutput,
    )
    @idempotent
    def post(self, request: Request, experiment_id: int) -> Response:
        refuse_unknown_fields(request.data, tuple(self.ExperimentStartInputSerializer().fields))
        data = self.ExperimentStartInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        experiment = selectors.experiment_get(experiment_id=experiment_id)
        services.experiment_start(experiment=experiment, **data.validated_data)
        return Response(
            ExperimentOutput(selectors.experiment_get(experiment_id=experiment_id)).data
        )


class ExperimentCancelApi(APIView):
    # Tokens of scope submit may call it (CI); see accounts.authentication.
    token_scope = "submit"

    permission_classes = (IsExperimenterOrReadOnly,)

    @extend_schema(operation_id="experiments_cancel", request=None, responses=ExperimentOutput)
    @idempotent
    def post(self, request: Request, experiment_id: int) -> Response:
        experiment = selectors.experiment_get(experiment_id=experiment_id)
        services.experiment_cancel(experiment=experiment)
        return Response(
            ExperimentOutput(selectors.experiment_get(experiment_id=experiment_id)).data
        )


class ObjectivesValidateApi(APIView):
    """POST an objectives document (and optionally the experiment's load and workload names):
    200 with its normalised form and hash, or 400 with the field errors experiment creation
    would give (``objectives.<path>``). Nothing is stored; the new-experiment page calls it as
    the user types."""

    # It computes and stores nothing: a read token may POST it (accounts.authentication).
    token_scope = "read"

    permission_classes = (IsExperimenterOrReadOnly,)

    class ObjectivesValidateInput(serializers.Serializer[Any]):
        objectives = serializers.JSONField()
        loads = serializers.ListField(child=serializers.CharField(), required=False)
        workloads = serializers.ListField(child=serializers.CharField(), required=False)

    @extend_schema(
        request=ObjectivesValidateInput,
        responses=inline_serializer(
            "ObjectivesValidateOutput",
            {"objectives": serializers.JSONField(), "sha256": serializers.CharField()},
        ),
    )
    @errors(without=(409,))  # a check of the posted document only: no state, no conflict
    def post(self, request: Request) -> Response:
        refuse_unknown_fields(request.data, ("objectives", "loads", "workloads"))
        data = self.ObjectivesValidateInput(data=request.data)
        data.is_valid(raise_exception=True)
        normalised = services.objectives_check(
            data.validated_data["objectives"],
            loads=data.validated_data.get("loads"),
            workloads=data.validated_data.get("workloads"),
        )
        return Response({"objectives": normalised, "sha256": objectives_hash(normalised)})
