"""REST API for webhooks and e-mail opt-ins (each user manages their own) — thin."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import IsViewer
from notifications import EVENTS, selectors, services
from notifications.models import Webhook
from specportal.api.idempotency import idempotent
from specportal.api.input import refuse_unknown_fields


class DeliveryOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    event = serializers.CharField()
    status = serializers.CharField()
    attempts = serializers.IntegerField()
    last_status_code = serializers.IntegerField(allow_null=True)
    last_error = serializers.CharField()
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    delivered_at = serializers.DateTimeField(allow_null=True)


class WebhookOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    url = serializers.URLField()
    events = serializers.ListField(child=serializers.ChoiceField(EVENTS))
    active = serializers.BooleanField()
    created_at = serializers.DateTimeField()


class WebhookCreatedOutput(WebhookOutput):
    secret = serializers.CharField(help_text="Shown once: sign-checking key (HMAC-SHA256).")


class WebhookInput(serializers.Serializer[Any]):
    url = serializers.URLField(max_length=2000)
    events = serializers.ListField(child=serializers.ChoiceField(EVENTS), min_length=1)


WEBHOOK_EXAMPLE = OpenApiExample(
    "register",
    value={
        "url": "https://ci.example.com/specportal-hook",
        "events": ["experiment.finished", "verdict.changed"],
    },
    request_only=True,
)
WEBHOOK_CREATED_EXAMPLE = OpenApiExample(
    "registered",
    value={
        "id": 7,
        "url": "https://ci.example.com/specportal-hook",
        "events": ["experiment.finished", "verdict.changed"],
        "active": True,
        "created_at": "2026-12-01T12:00:00Z",
        "secret": "whsec_3q2+7w...",
    },
    response_only=True,
)


class WebhookListApi(APIView):
    permission_classes = (IsViewer,)

    @extend_schema(operation_id="webhooks_list", responses=WebhookOutput(many=True))
    def get(self, request: Request) -> Response:
        hooks = selectors.webhook_list(owner=request.user)  # type: ignore[arg-type]
        return Response(WebhookOutput(hooks, many=True).data)

    @extend_schema(
        operation_id="webhooks_create",
        request=WebhookInput,
        responses={201: WebhookCreatedOutput},
        examples=[WEBHOOK_EXAMPLE, WEBHOOK_CREATED_EXAMPLE],
        description="Register a URL for events. Every delivery is a JSON POST signed "
        "`X-SpecPortal-Signature: sha256=HMAC-SHA256(secret, body)`; the secret is shown only "
        "in this answer. Loopback, link-local and private addresses are refused.",
    )
    # Not @idempotent: a replay would have to keep the secret in clear.
    def post(self, request: Request) -> Response:
        refuse_unknown_fields(request.data, ("url", "events"))
        data = WebhookInput(data=request.data)
        data.is_valid(raise_exception=True)
        webhook, secret = services.webhook_create(owner=request.user, **data.validated_data)  # type: ignore[arg-type]
        body = dict(WebhookOutput(webhook).data)
        body["secret"] = secret
        return Response(body, status=status.HTTP_201_CREATED)


def _own(request: Request, webhook_id: int) -> Webhook:
    return get_object_or_404(Webhook, pk=webhook_id, owner=request.user)


class WebhookDetailApi(APIView):
    permission_classes = (IsViewer,)

    @extend_schema(operation_id="webhooks_retrieve", responses=WebhookOutput)
    def get(self, request: Request, webhook_id: int) -> Response:
        return Response(WebhookOutput(_own(request, webhook_id)).data)

    @extend_schema(operation_id="webhooks_destroy", responses={204: None})
    @idempotent
    def delete(self, request: Request, webhook_id: int) -> Response:
        services.webhook_delete(webhook=_own(request, webhook_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookDeliveriesApi(APIView):
    permission_classes = (IsViewer,)

    @extend_schema(
        operation_id="webhooks_deliveries_list",
        responses=DeliveryOutput(many=True),
        description="The delivery log: the newest 100 deliveries with status, attempts and "
        "the last error.",
    )
    def get(self, request: Request, webhook_id: int) -> Response:
        deliveries = selectors.delivery_list(webhook=_own(request, webhook_id))
        return Response(DeliveryOutput(deliveries, many=True).data)


class EmailPreferencesInput(serializers.Serializer[Any]):
    events = serializers.ListField(child=serializers.ChoiceField(EVENTS))


class EmailPreferencesApi(APIView):
    permission_classes = (IsViewer,)

    @extend_schema(operation_id="notifications_email_retrieve", responses=EmailPreferencesInput)
    def get(self, request: Request) -> Response:
        return Response({"events": selectors.email_events(user=request.user)})  # type: ignore[arg-type]

    @extend_schema(
        operation_id="notifications_email_update",
        request=EmailPreferencesInput,
        responses=EmailPreferencesInput,
        examples=[OpenApiExample("opt in", value={"events": ["experiment.finished"]})],
        description="Opt in to e-mail for these events (the list replaces the previous one).",
    )
    @idempotent
    def put(self, request: Request) -> Response:
        refuse_unknown_fields(request.data, ("events",))
        data = EmailPreferencesInput(data=request.data)
        data.is_valid(raise_exception=True)
        events = services.email_subscriptions_set(
            user=request.user,  # type: ignore[arg-type]
            events=data.validated_data["events"],
        )
        return Response({"events": events})
