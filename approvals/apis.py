"""REST API for deployments and change requests — thin: parse, call a service, serialize.

Transitions are POST actions (``/api/v1/change-requests/{id}/approve/``); a refused one answers
403 (role, author, four eyes), 409 (illegal transition, insufficient evidence without a
justification, stale, concurrent decision) in the one error shape.
"""

from __future__ import annotations

from typing import Any

from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals import selectors, services
from approvals.models import ChangeRequest, Deployment, DeploymentPeriod
from approvals.permissions import (
    ApplierWrites,
    DiscussionWrites,
    ManagerWrites,
    ProposerWrites,
)
from configurations.models import FrozenConfiguration
from experiments.models import Experiment
from specportal.api.errors import ApplicationError
from specportal.api.idempotency import idempotent
from specportal.api.input import NameField, refuse_unknown_fields, refuse_unknown_filters
from specportal.api.query import ChoiceList, query_clean
from specportal.engines.launch import build_launch_command


class ConfigurationRefOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    config_hash = serializers.CharField()
    engine = serializers.CharField()
    method = serializers.CharField()


class PeriodOutput(serializers.Serializer[Any]):
    configuration = ConfigurationRefOutput()
    started_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField(allow_null=True)
    change_request = serializers.IntegerField(source="change_request_id", allow_null=True)
    approved_by = serializers.CharField(
        source="approved_by.username", allow_null=True, default=None
    )
    applied_by = serializers.CharField(source="applied_by.username", allow_null=True, default=None)
    against_evidence = serializers.BooleanField()
    evidence = serializers.JSONField()


class DeploymentOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    owner_team = serializers.CharField()
    description = serializers.CharField()
    configuration = ConfigurationRefOutput()
    launch_command = serializers.SerializerMethodField()
    workloads = serializers.JSONField()
    loads = serializers.JSONField()
    objectives = serializers.JSONField()
    objectives_hash = serializers.CharField()
    accepted_objectives = serializers.SerializerMethodField()
    is_demo = serializers.BooleanField()
    self_approval_reason = serializers.CharField()
    approval_valid_days = serializers.IntegerField()
    created_at = serializers.DateTimeField()

    def get_launch_command(self, deployment: Deployment) -> dict[str, Any]:
        return build_launch_command(deployment.configuration.document).as_dict()

    def get_accepted_objectives(self, deployment: Deployment) -> list[dict[str, Any]]:
        return [
            {
                "objectives_hash": a.objectives_hash,
                "reason": a.reason,
                "accepted_by": a.accepted_by.username,
                "accepted_at": a.accepted_at.isoformat(),
            }
            for a in deployment.accepted_objectives.select_related("accepted_by")
        ]


class CheckOutput(serializers.Serializer[Any]):
    stage = serializers.CharField()
    evaluated_at = serializers.DateTimeField()
    passed = serializers.BooleanField()
    rules = serializers.JSONField()
    verdict_ids = serializers.JSONField()


class CommentOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    author = serializers.CharField(source="author.username")
    body = serializers.CharField()
    created_at = serializers.DateTimeField()


class ChangeRequestOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    deployment = serializers.CharField(source="deployment.name")
    from_configuration = ConfigurationRefOutput()
    to_configuration = ConfigurationRefOutput()
    reason = serializers.CharField()
    evidence = serializers.SerializerMethodField()
    state = serializers.CharField()
    author = serializers.CharField(source="author.username")
    created_at = serializers.DateTimeField()
    opened_at = serializers.DateTimeField(allow_null=True)
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True, default=None)
    decided_at = serializers.DateTimeField(allow_null=True)
    decision_note = serializers.CharField()
    against_evidence = serializers.BooleanField(
        help_text="approved against the evidence (with the approver's written justification)"
    )
    self_approval_reason = serializers.CharField()
    expires_at = serializers.DateTimeField(allow_null=True)
    applied_by = serializers.CharField(source="applied_by.username", allow_null=True, default=None)
    applied_at = serializers.DateTimeField(allow_null=True)
    closed_reason = serializers.CharField()
    diff = serializers.SerializerMethodField()
    evidence_check = serializers.SerializerMethodField()
    comments = CommentOutput(many=True)

    def get_evidence(self, cr: ChangeRequest) -> list[int]:
        return sorted(cr.evidence.values_list("pk", flat=True))

    def get_diff(self, cr: ChangeRequest) -> list[dict[str, Any]]:
        return selectors.configuration_diff(change_request=cr)

    def get_evidence_check(self, cr: ChangeRequest) -> dict[str, Any] | None:
        check = selectors.latest_check(change_request=cr)
        return dict(CheckOutput(check).data) if check else None


def _deployment_body(deployment: Deployment) -> dict[str, Any]:
    return dict(DeploymentOutput(selectors.deployment_get(name=deployment.name)).data)


def _request_body(cr: ChangeRequest) -> dict[str, Any]:
    return dict(ChangeRequestOutput(selectors.change_request_get(change_request_id=cr.pk)).data)


def _parsed(serializer_class: type[serializers.Serializer[Any]], request: Request) -> Any:
    refuse_unknown_fields(request.data, tuple(serializer_class().fields))
    data = serializer_class(data=request.data)
    data.is_valid(raise_exception=True)
    return data.validated_data


class DeploymentListApi(APIView):
    permission_classes = (ManagerWrites,)

    class DeploymentCreateInputSerializer(serializers.Serializer[Any]):
        name = serializers.SlugField(max_length=100)
        owner_team = NameField(max_length=100)
        description = serializers.CharField(required=False, allow_blank=True, default="")
        configuration = serializers.PrimaryKeyRelatedField(
            queryset=FrozenConfiguration.objects.all()
        )
        workloads = serializers.ListField(child=serializers.DictField())
        loads = serializers.ListField(child=serializers.DictField())
        objectives = serializers.DictField()
        is_demo = serializers.BooleanField(default=False)
        self_approval_reason = serializers.CharField(required=False, allow_blank=True, default="")
        approval_valid_days = serializers.IntegerField(min_value=1, max_value=365, default=14)

    @extend_schema(operation_id="deployments_list", responses=DeploymentOutput(many=True))
    def get(self, request: Request) -> Response:
        refuse_unknown_filters(request, ())
        return Response(DeploymentOutput(selectors.deployment_list(), many=True).data)

    @extend_schema(
        operation_id="deployments_create",
        request=DeploymentCreateInputSerializer,
        responses={201: DeploymentOutput},
    )
    @idempotent
    def post(self, request: Request) -> Response:
        data = _parsed(self.DeploymentCreateInputSerializer, request)
        deployment = services.deployment_create(user=request.user, **data)
        return Response(_deployment_body(deployment), status=status.HTTP_201_CREATED)


class DeploymentDetailApi(APIView):
    permission_classes = (ManagerWrites,)

    class DeploymentUpdateInputSerializer(serializers.Serializer[Any]):
        owner_team = NameField(max_length=100, required=False)
        description = serializers.CharField(required=False, allow_blank=True)
        self_approval_reason = serializers.CharField(required=False, allow_blank=True)
        approval_valid_days = serializers.IntegerField(min_value=1, max_value=365, required=False)

    @extend_schema(operation_id="deployments_retrieve", responses=DeploymentOutput)
    def get(self, request: Request, name: str) -> Response:
        return Response(DeploymentOutput(selectors.deployment_get(name=name)).data)

    @extend_schema(
        operation_id="deployments_update",
        request=DeploymentUpdateInputSerializer,
        responses=DeploymentOutput,
    )
    @idempotent
    def patch(self, request: Request, name: str) -> Response:
        data = _parsed(self.DeploymentUpdateInputSerializer, request)
        deployment = selectors.deployment_get(name=name)
        services.deployment_update(user=request.user, deployment=deployment, **data)
        return Response(_deployment_body(deployment))


class DeploymentHistoryApi(APIView):
    """Every configuration the deployment ran with; ``?as_of=ISO-8601``: the one serving then."""

    @extend_schema(
        operation_id="deployments_history",
        parameters=[
            OpenApiParameter(
                "as_of", OpenApiTypes.DATETIME, description="an ISO 8601 moment with a time zone"
            )
        ],
        responses=PeriodOutput(many=True),
    )
    def get(self, request: Request, name: str) -> Response:
        refuse_unknown_filters(request, ("as_of",))
        deployment = selectors.deployment_get(name=name)
        as_of = request.query_params.get("as_of")
        if as_of is None:
            periods: list[DeploymentPeriod] = list(
                selectors.deployment_history(deployment=deployment)
            )
            return Response(PeriodOutput(periods, many=True).data)
        when = parse_datetime(as_of)
        if when is None or when.tzinfo is None:
            raise ApplicationError(
                "as_of must be an ISO 8601 date-time with a time zone.",
                fields={"as_of": ["e.g. 2026-12-01T12:00:00Z"]},
            )
        period = selectors.deployment_configuration_as_of(deployment=deployment, when=when)
        return Response(PeriodOutput([period] if period else [], many=True).data)


class DeploymentObjectivesAcceptApi(APIView):
    permission_classes = (ManagerWrites,)

    class AcceptInputSerializer(serializers.Serializer[Any]):
        objectives = serializers.DictField()
        reason = serializers.CharField()

    @extend_schema(
        operation_id="deployments_objectives_accept",
        request=AcceptInputSerializer,
        responses={201: DeploymentOutput},
    )
    @idempotent
    def post(self, request: Request, name: str) -> Response:
        data = _parsed(self.AcceptInputSerializer, request)
        deployment = selectors.deployment_get(name=name)
        services.deployment_objectives_accept(user=request.user, deployment=deployment, **data)
        return Response(_deployment_body(deployment), status=status.HTTP_201_CREATED)


class ChangeRequestFilters(serializers.Serializer[Any]):
    deployment = serializers.CharField(required=False, max_length=200)
    state = ChoiceList(ChangeRequest.State.values, required=False, help_text="one or several")
    author = serializers.CharField(required=False, max_length=150)


class ChangeRequestListApi(APIView):
    permission_classes = (ProposerWrites,)
    # Opening a change request is a proposal, what `specportal ci run --open-change-request`
    # does after a KEEP with a CI token; deciding and applying it still need a full token.
    token_scope = "submit"

    class ChangeRequestCreateInputSerializer(serializers.Serializer[Any]):
        deployment = serializers.SlugRelatedField(
            slug_field="name", queryset=Deployment.objects.all()
        )
        to_configuration = serializers.PrimaryKeyRelatedField(
            queryset=FrozenConfiguration.objects.all()
        )
        reason = serializers.CharField()
        evidence = serializers.PrimaryKeyRelatedField(queryset=Experiment.objects.all(), many=True)
        open = serializers.BooleanField(
            default=False, help_text="open it at once (evidence checked now), as CI does"
        )

    @extend_schema(
        operation_id="change_requests_list",
        parameters=[ChangeRequestFilters],
        responses=ChangeRequestOutput(many=True),
    )
    def get(self, request: Request) -> Response:
        filters = query_clean(request, ChangeRequestFilters)
        requests = selectors.change_request_list(filters=filters)[:200]
        return Response(ChangeRequestOutput(requests, many=True).data)

    @extend_schema(
        operation_id="change_requests_create",
        request=ChangeRequestCreateInputSerializer,
        responses={201: ChangeRequestOutput},
    )
    @idempotent
    def post(self, request: Request) -> Response:
        data = _parsed(self.ChangeRequestCreateInputSerializer, request)
        cr = services.change_request_create(
            user=request.user,
            deployment=data["deployment"],
            to_configuration=data["to_configuration"],
            reason=data["reason"],
            evidence=data["evidence"],
            open_now=data["open"],
        )
        return Response(_request_body(cr), status=status.HTTP_201_CREATED)


class ChangeRequestDetailApi(APIView):
    @extend_schema(operation_id="change_requests_retrieve", responses=ChangeRequestOutput)
    def get(self, request: Request, change_request_id: int) -> Response:
        cr = selectors.change_request_get(change_request_id=change_request_id)
        return Response(ChangeRequestOutput(cr).data)


NOTE_INPUT = inline_serializer("ChangeRequestNote", {"note": serializers.CharField()})
JUSTIFICATION_INPUT = inline_serializer(
    "ChangeRequestApproval",
    {
        "justification": serializers.CharField(
            required=False,
            help_text="required when the evidence rules fail: then it is approved against the "
            "evidence",
        )
    },
)


class _TransitionApi(APIView):
    action = ""
    fields: tuple[str, ...] = ()
    required: tuple[str, ...] = ()

    def post(self, request: Request, change_request_id: int) -> Response:
        refuse_unknown_fields(request.data, self.fields)
        missing = {key: ["required"] for key in self.required if key not in request.data}
        bad = {
            key: ["must be a string"]
            for key in self.fields
            if key in request.data and not isinstance(request.data[key], str)
        }
        if missing or bad:
            raise ApplicationError("The request has invalid fields.", fields={**missing, **bad})
        cr = selectors.change_request_get(change_request_id=change_request_id)
        arguments = {key: request.data[key] for key in self.fields if key in request.data}
        getattr(services, f"change_request_{self.action}")(
            user=request.user, change_request=cr, **arguments
        )
        return Response(_request_body(cr))


class ChangeRequestOpenApi(_TransitionApi):
    permission_classes = (ProposerWrites,)
    action = "open"

    @extend_schema(operation_id="change_requests_open", request=None, responses=ChangeRequestOutput)
    @idempotent
    def post(self, request: Request, change_request_id: int) -> Response:
        return super().post(request, change_request_id)


class ChangeRequestWithdrawApi(_TransitionApi):
    permission_classes = (ProposerWrites,)
    action = "withdraw"
    fields = ("note",)

    @extend_schema(
        operation_id="change_requests_withdraw", request=NOTE_INPUT, responses=ChangeRequestOutput
    )
    @idempotent
    def post(self, request: Request, change_request_id: int) -> Response:
        return super().post(request, change_request_id)


class ChangeRequestApproveApi(_TransitionApi):
    permission_classes = (ManagerWrites,)
    action = "approve"
    fields = ("justification",)

    @extend_schema(
        operation_id="change_requests_approve",
        request=JUSTIFICATION_INPUT,
        responses=ChangeRequestOutput,
    )
    @idempotent
    def post(self, request: Request, change_request_id: int) -> Response:
        return super().post(request, change_request_id)


class ChangeRequestRejectApi(_TransitionApi):
    permission_classes = (ManagerWrites,)
    action = "reject"
    fields = ("note",)
    required = ("note",)

    @extend_schema(
        operation_id="change_requests_reject", request=NOTE_INPUT, responses=ChangeRequestOutput
    )
    @idempotent
    def post(self, request: Request, change_request_id: int) -> Response:
        return super().post(request, change_request_id)


class ChangeRequestApplyApi(_TransitionApi):
    permission_classes = (ApplierWrites,)
    action = "apply"

    @extend_schema(
        operation_id="change_requests_apply", request=None, responses=ChangeRequestOutput
    )
    @idempotent
    def post(self, request: Request, change_request_id: int) -> Response:
        return super().post(request, change_request_id)


class ChangeRequestCommentApi(APIView):
    permission_classes = (DiscussionWrites,)

    class CommentInputSerializer(serializers.Serializer[Any]):
        body = serializers.CharField()

    @extend_schema(
        operation_id="change_requests_comment",
        request=CommentInputSerializer,
        responses={201: CommentOutput},
    )
    @idempotent
    def post(self, request: Request, change_request_id: int) -> Response:
        data = _parsed(self.CommentInputSerializer, request)
        cr = selectors.change_request_get(change_request_id=change_request_id)
        comment = services.change_request_comment(
            user=request.user, change_request=cr, body=data["body"]
        )
        return Response(CommentOutput(comment).data, status=status.HTTP_201_CREATED)
