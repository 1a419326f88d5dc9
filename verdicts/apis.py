"""REST API for verdicts (read-only: verdicts are computed by the portal worker, never here)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import IsExperimenterOrReadOnly
from experiments.selectors import experiment_get
from specportal.api.errors import error_body
from specportal.api.input import refuse_unknown_fields, refuse_unknown_filters
from verdicts import selectors, services

VERDICT_REF = {"$ref": "#/components/schemas/Verdict"}
NO_VERDICT = OpenApiResponse(
    description="The experiment has no verdict yet (not started, or no run has finished), or "
    "does not exist; the error shape.",
    examples=[
        OpenApiExample(
            "no verdict yet",
            value=error_body(
                "not_found", "Experiment 7 has no verdict yet: none of its runs has finished."
            ),
        )
    ],
)


class VerdictApi(APIView):
    @extend_schema(
        operation_id="experiments_verdict_retrieve",
        summary="The experiment's current verdict (analysis/VERDICT.md)",
        description=(
            "KEEP, DROP or INCONCLUSIVE per candidate, per workload and per cell, with every "
            "objective, guard, flag and the speculation model. Recomputed by the portal worker "
            "whenever a run of the experiment ends or is re-queued; an older verdict is "
            "superseded (`supersedes`), never edited. Emulated hosts: `emulated_label`."
        ),
        responses={200: VERDICT_REF, 404: NO_VERDICT},
    )
    def get(self, request: Request, experiment_id: int) -> Response:
        refuse_unknown_filters(request, ())
        experiment = experiment_get(experiment_id=experiment_id)
        verdict = selectors.verdict_latest(experiment=experiment)
        if verdict is None:
            return Response(
                error_body(
                    "not_found",
                    f"Experiment {experiment.pk} has no verdict yet: none of its runs has "
                    "finished.",
                ),
                status=status.HTTP_404_NOT_FOUND,
            )
        return Response(selectors.verdict_as_document(verdict))


class VerdictHistoryEntry(serializers.Serializer[Any]):
    verdict_id = serializers.IntegerField()
    supersedes = serializers.IntegerField(allow_null=True)
    computed_at = serializers.DateTimeField()
    analysis_version = serializers.CharField()
    objectives_sha256 = serializers.CharField()
    inputs = serializers.ListField(child=serializers.DictField())
    candidates = serializers.ListField(child=serializers.DictField())


class VerdictHistoryApi(APIView):
    @extend_schema(
        operation_id="experiments_verdicts_list",
        summary="Every verdict the experiment has had, newest first",
        responses={200: VerdictHistoryEntry(many=True)},
    )
    def get(self, request: Request, experiment_id: int) -> Response:
        refuse_unknown_filters(request, ())
        experiment = experiment_get(experiment_id=experiment_id)
        body: list[dict[str, Any]] = [
            {
                "verdict_id": v.pk,
                "supersedes": v.supersedes_id,
                "computed_at": v.computed_at,
                "analysis_version": v.analysis_version,
                "objectives_sha256": v.objectives_sha256,
                "inputs": v.inputs,
                "candidates": [
                    {"arm": c.arm.label, "state": c.state, "workloads": c.workloads}
                    for c in v.candidates.all()
                ],
            }
            for v in selectors.verdict_history(experiment=experiment)
        ]
        return Response(VerdictHistoryEntry(body, many=True).data)


class FollowUpApi(APIView):
    """The verdict's schedule advice, measured: one call stores the advised candidate and creates
    the draft experiment that measures it."""

    permission_classes = (IsExperimenterOrReadOnly,)

    class FollowUpInput(serializers.Serializer[Any]):
        arm = serializers.CharField(max_length=64)
        workload = serializers.CharField(max_length=100, required=False)

    class FollowUpOutput(serializers.Serializer[Any]):
        experiment = serializers.IntegerField()
        url = serializers.CharField()
        configuration = serializers.IntegerField()
        labels = serializers.ListField(child=serializers.CharField())

    @extend_schema(
        operation_id="experiments_follow_up_create",
        summary="Measure the verdict's K-by-batch schedule advice in a new draft experiment",
        description=(
            "Stores the advised candidate configuration of the current verdict (its `advice` for "
            "`arm` on `workload`, or the first workload with advice) and creates a draft "
            "experiment comparing it with the baseline and the candidate it came from, at the "
            "same loads, objectives, hosts and repetitions; plan and start it as any other. "
            "409 `no_advice` with the advice's reason when there is none (too few load levels, "
            "a method the schedule does not support), 409 `no_verdict` before any verdict."
        ),
        request=FollowUpInput,
        responses={201: FollowUpOutput},
    )
    def post(self, request: Request, experiment_id: int) -> Response:
        refuse_unknown_fields(request.data, ("arm", "workload"))
        data = self.FollowUpInput(data=request.data)
        data.is_valid(raise_exception=True)
        experiment = experiment_get(experiment_id=experiment_id)
        created = services.verdict_follow_up_create(
            user=request.user,
            experiment_id=experiment.pk,
            arm=data.validated_data["arm"],
            workload=data.validated_data.get("workload"),
        )
        arms = list(created.arms.order_by("position"))
        body = {
            "experiment": created.pk,
            "url": f"/experiments/{created.pk}/",
            "configuration": arms[-1].configuration_id,
            "labels": [a.label for a in arms],
        }
        return Response(body, status=status.HTTP_201_CREATED)
