"""The accounts API: who am I, and each user's own API tokens (thin: services write)."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import roles, selectors, services
from accounts.models import TOKEN_STATES, ApiToken
from accounts.selectors import user_has_role
from specportal.api.input import StrictCharField, refuse_unknown_fields, refuse_unknown_filters


class WhoAmIApi(APIView):
    """The caller's user name and roles (a cheap way for CI to check its token)."""

    @extend_schema(
        responses=inline_serializer(
            "WhoAmI",
            {"username": serializers.CharField(), "roles": serializers.ListField()},
        )
    )
    def get(self, request: Request) -> Response:
        user = request.user
        held = [role for role in roles.ALL_ROLES if user_has_role(user, role)]
        return Response({"username": user.get_username(), "roles": held})


class ApiTokenOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    scope = serializers.ChoiceField(ApiToken.Scope.choices)
    prefix = serializers.CharField(
        help_text="Public: `spt_` and 8 random characters, none of them part of the secret."
    )
    state = serializers.ChoiceField(TOKEN_STATES)
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


class ApiTokenCreatedOutput(ApiTokenOutput):
    token = serializers.CharField(
        help_text="The secret, shown only in this answer: send it as `Authorization: Token <token>`."
    )


class ApiTokenInput(serializers.Serializer[Any]):
    name = StrictCharField(max_length=100)
    scope = serializers.ChoiceField(ApiToken.Scope.choices)
    expires_in_days = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="Days until the token expires; omitted or null: the longest allowed "
        "(SPECPORTAL_API_TOKEN_MAX_DAYS, 365 by default; never when that is 0).",
    )


TOKEN_CREATE_EXAMPLE = OpenApiExample(
    "a CI token",
    value={"name": "ci-main", "scope": "submit", "expires_in_days": 90},
    request_only=True,
)
TOKEN_CREATED_EXAMPLE = OpenApiExample(
    "created",
    value={
        "id": 3,
        "name": "ci-main",
        "scope": "submit",
        "prefix": "spt_k3v9x2qa",
        "state": "active",
        "created_at": "2026-12-01T12:00:00Z",
        "expires_at": "2027-03-01T12:00:00Z",
        "last_used_at": None,
        "revoked_at": None,
        "token": "spt_k3v9x2qa_Vb0...",
    },
    response_only=True,
)


def _token_data(token: ApiToken) -> dict[str, Any]:
    return dict(ApiTokenOutput({**vars(token), "state": token.state}).data)


class ApiTokenListApi(APIView):
    """The caller's own API tokens. Creating one needs a login or a token of scope ``full``."""

    @extend_schema(operation_id="tokens_list", responses=ApiTokenOutput(many=True))
    def get(self, request: Request) -> Response:
        refuse_unknown_filters(request, ())
        tokens = selectors.api_token_list(user=request.user)
        return Response([_token_data(token) for token in tokens])

    @extend_schema(
        operation_id="tokens_create",
        request=ApiTokenInput,
        responses={201: ApiTokenCreatedOutput},
        examples=[TOKEN_CREATE_EXAMPLE, TOKEN_CREATED_EXAMPLE],
        description="Issue an API token for yourself. The secret (`token`) is in this answer "
        "only: it is stored as a SHA-256. Scopes: `read` (GET only), `submit` (also "
        "configurations, experiments: create, plan, start, cancel, imports and opening a change "
        "request; needs the "
        "experimenter role), `full` (everything your roles allow). A token never does more "
        "than its user's roles allow at the moment of each request.",
    )
    # Not @idempotent: a replay would have to keep the secret in clear.
    def post(self, request: Request) -> Response:
        refuse_unknown_fields(request.data, ("name", "scope", "expires_in_days"))
        data = ApiTokenInput(data=request.data)
        data.is_valid(raise_exception=True)
        token, secret = services.api_token_create(user=request.user, **data.validated_data)  # type: ignore[arg-type]
        return Response({**_token_data(token), "token": secret}, status=status.HTTP_201_CREATED)


class ApiTokenDetailApi(APIView):
    @extend_schema(operation_id="tokens_retrieve", responses=ApiTokenOutput)
    def get(self, request: Request, token_id: int) -> Response:
        return Response(_token_data(_own(request, token_id)))

    @extend_schema(
        operation_id="tokens_revoke",
        responses={200: ApiTokenOutput},
        description="Revoke the token at once (it then gets 401). It stays listed, as revoked.",
    )
    def delete(self, request: Request, token_id: int) -> Response:
        token = services.api_token_revoke(token=_own(request, token_id))
        return Response(_token_data(token))


def _own(request: Request, token_id: int) -> ApiToken:
    token = selectors.api_token_get(user=request.user, token_id=token_id)
    if token is None:
        raise Http404
    return token
