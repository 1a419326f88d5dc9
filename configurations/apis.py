"""REST API for frozen configurations (``/api/v1/configurations/``).

Permissions: any role reads; experimenters create, rename and delete configurations. Linting,
building a launch command and importing a command line compute without storing anything, so any
role may call them.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import IsExperimenterOrReadOnly, IsViewer
from configurations import selectors, services
from configurations.models import EDITABLE_FIELDS, IDENTITY_FIELDS, FrozenConfiguration
from hosts.selectors import host_find_by_name
from specportal.api.errors import ApplicationError
from specportal.api.idempotency import idempotent
from specportal.api.input import (
    LabelsField,
    NameField,
    StrictCharField,
    refuse_unknown_fields,
)
from specportal.api.query import Choice, object_id, query_clean
from specportal.engines.document import DocumentError, diff, identity
from specportal.engines.flags import ENGINES
from specportal.engines.importer import ImportProblem, import_command
from specportal.engines.launch import build_launch_command
from specportal.engines.lint import HostFacts, lint

MAX_PAGE = 1000


def _document_problem(exc: DocumentError, prefix: str = "document") -> ApplicationError:
    fields = {f"{prefix}.{path}" if path else prefix: msgs for path, msgs in exc.problems.items()}
    return ApplicationError(f"The configuration document is invalid: {exc}", fields=fields)


# --- configurations -------------------------------------------------------------------------------


class ConfigurationOutput(serializers.ModelSerializer[FrozenConfiguration]):
    created_by = serializers.SerializerMethodField()

    class Meta:
        model = FrozenConfiguration
        fields = (
            "id",
            "name",
            "description",
            "labels",
            "engine",
            "method",
            "config_hash",
            "target_hash",
            "proposal_hash",
            "document",
            "created_by",
            "created_at",
        )

    def get_created_by(self, obj: FrozenConfiguration) -> str | None:
        return obj.created_by.get_username() if obj.created_by else None


class ConfigurationFilters(serializers.Serializer[Any]):
    engine = Choice(ENGINES, required=False)
    method = serializers.CharField(required=False, max_length=64)
    target_hash = serializers.CharField(required=False, max_length=64)
    proposal_hash = serializers.CharField(required=False, max_length=64)
    # A field named like Field.label: DRF's metaclass moves it aside, mypy cannot know.
    label = serializers.CharField(  # type: ignore[assignment]
        required=False, max_length=400, help_text="`key` or `key=value`"
    )
    search = serializers.CharField(
        required=False, max_length=200, help_text="substring of the name"
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_PAGE, default=100)
    offset = serializers.IntegerField(required=False, min_value=0, max_value=2**62, default=0)


class ConfigurationListApi(APIView):
    # Tokens of scope submit may call it (CI); see accounts.authentication.
    token_scope = "submit"

    permission_classes = (IsExperimenterOrReadOnly,)

    class ConfigurationCreateInputSerializer(serializers.Serializer[Any]):
        document = serializers.JSONField()
        name = NameField(max_length=200, required=False, allow_blank=True, default="")
        description = StrictCharField(required=False, allow_blank=True, default="")
        labels = LabelsField(required=False, default=dict)

    @extend_schema(
        parameters=[ConfigurationFilters],
        operation_id="configurations_list",
        responses=inline_serializer(
            "ConfigurationList",
            {"count": serializers.IntegerField(), "results": ConfigurationOutput(many=True)},
        ),
    )
    def get(self, request: Request) -> Response:
        filters = query_clean(request, ConfigurationFilters)
        limit, offset = filters.pop("limit"), filters.pop("offset")
        qs = selectors.configuration_list(**filters)
        rows, count = list(qs[offset : offset + limit]), qs.count()
        return Response({"count": count, "results": ConfigurationOutput(rows, many=True).data})

    @extend_schema(
        request=ConfigurationCreateInputSerializer,
        responses={
            201: inline_serializer(
                "ConfigurationCreated",
                {"created": serializers.BooleanField(), "configuration": ConfigurationOutput()},
            ),
            200: inline_serializer(
                "ConfigurationExisting",
                {"created": serializers.BooleanField(), "configuration": ConfigurationOutput()},
            ),
        },
        description="Idempotent: the same content (after normalisation) returns the stored "
        'configuration with 200 and "created": false.',
    )
    @idempotent
    def post(self, request: Request) -> Response:
        refuse_unknown_fields(request.data, ("document", "name", "description", "labels"))
        serializer = self.ConfigurationCreateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        config, created = services.configuration_create(
            created_by=request.user,
            **serializer.validated_data,
        )
        body = {"created": created, "configuration": ConfigurationOutput(config).data}
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class ConfigurationDetailApi(APIView):
    permission_classes = (IsExperimenterOrReadOnly,)

    class UpdateSerializer(serializers.Serializer[Any]):
        name = NameField(max_length=200, required=False, allow_blank=True)
        description = serializers.CharField(required=False, allow_blank=True)
        labels = LabelsField(required=False)

    @extend_schema(responses=ConfigurationOutput)
    def get(self, request: Request, config_id: int) -> Response:
        config = get_object_or_404(FrozenConfiguration, pk=config_id)
        return Response(ConfigurationOutput(config).data)

    @extend_schema(request=UpdateSerializer, responses=ConfigurationOutput)
    @idempotent
    def patch(self, request: Request, config_id: int) -> Response:
        config = get_object_or_404(FrozenConfiguration, pk=config_id)
        refuse_unknown_fields(request.data, EDITABLE_FIELDS, (*IDENTITY_FIELDS, "id"))
        serializer = self.UpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        config = services.configuration_update(config=config, **serializer.validated_data)
        return Response(ConfigurationOutput(config).data)

    @extend_schema(request=None, responses={204: None})
    @idempotent
    def delete(self, request: Request, config_id: int) -> Response:
        config = get_object_or_404(FrozenConfiguration, pk=config_id)
        services.configuration_delete(config=config)
        return Response(status=status.HTTP_204_NO_CONTENT)


class DiffQuery(serializers.Serializer[Any]):
    other = object_id(help_text="the id of the configuration to compare with")


class ConfigurationDiffApi(APIView):
    @extend_schema(
        parameters=[DiffQuery],
        responses=inline_serializer(
            "ConfigurationDiff",
            {
                "left": serializers.IntegerField(),
                "right": serializers.IntegerField(),
                "differences": serializers.ListField(child=serializers.DictField()),
            },
        ),
        description='JSON-Pointer paths, e.g. {"path": "/proposal/num_speculative_tokens", '
        '"left": 3, "right": 5}; lists compared whole; a key absent on one side has no value '
        "for that side.",
    )
    def get(self, request: Request, config_id: int) -> Response:
        left = get_object_or_404(FrozenConfiguration, pk=config_id)
        other = query_clean(request, DiffQuery)["other"]
        right = get_object_or_404(FrozenConfiguration, pk=other)
        return Response(
            {
                "left": left.pk,
                "right": right.pk,
                "differences": diff(left.document, right.document),
            }
        )


LAUNCH_OUTPUT = inline_serializer(
    "LaunchCommand",
    {
        "argv": serializers.ListField(child=serializers.CharField()),
        "env": serializers.DictField(child=serializers.CharField()),
        "shell": serializers.CharField(),
    },
)
FINDINGS_OUTPUT = inline_serializer(
    "LintFindings",
    {
        "findings": serializers.ListField(
            child=inline_serializer(
                "LintFinding",
                {
                    "rule": serializers.CharField(),
                    "severity": serializers.ChoiceField(choices=["error", "warning", "info"]),
                    "message": serializers.CharField(),
                    "source": serializers.CharField(),
                },
            )
        )
    },
)


class LaunchQuery(serializers.Serializer[Any]):
    host = serializers.CharField(required=False, max_length=255, help_text="address to serve on")
    port = serializers.IntegerField(required=False, min_value=1, max_value=65535)


def _launch_params(request: Request) -> dict[str, Any]:
    query = query_clean(request, LaunchQuery)
    return {"host": query.get("host"), "port": query.get("port")}


class ConfigurationLaunchCommandApi(APIView):
    @extend_schema(
        parameters=[LaunchQuery],
        responses=LAUNCH_OUTPUT,
        description="The exact argv and, separately, the environment.",
    )
    def get(self, request: Request, config_id: int) -> Response:
        config = get_object_or_404(FrozenConfiguration, pk=config_id)
        return Response(build_launch_command(config.document, **_launch_params(request)).as_dict())


def _host_facts(name: str | None) -> HostFacts | None:
    if not name:
        return None
    host = host_find_by_name(name=name)
    if host is None:
        raise ApplicationError("Unknown host.", fields={"host": [f"no host named {name!r}"]})
    return HostFacts(name=host.name, offline=host.offline)


class LintQuery(serializers.Serializer[Any]):
    host = serializers.CharField(
        required=False, max_length=200, help_text="lint for planning onto this host"
    )


class ConfigurationLintApi(APIView):
    @extend_schema(
        parameters=[LintQuery],
        responses=FINDINGS_OUTPUT,
    )
    def get(self, request: Request, config_id: int) -> Response:
        config = get_object_or_404(FrozenConfiguration, pk=config_id)
        host = _host_facts(query_clean(request, LintQuery).get("host"))
        return Response({"findings": [f.as_dict() for f in lint(config.document, host=host)]})


class DocumentInput(serializers.Serializer[Any]):
    document = serializers.JSONField()
    host = serializers.CharField(required=False)


class DocumentLintApi(APIView):
    """Lint a document without storing it (any role)."""

    # It computes and stores nothing: a read token may POST it (accounts.authentication).
    token_scope = "read"

    permission_classes = (IsViewer,)

    @extend_schema(request=DocumentInput, responses=FINDINGS_OUTPUT)
    @idempotent
    def post(self, request: Request) -> Response:
        refuse_unknown_fields(request.data, ("document", "host"))
        serializer = DocumentInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        document = serializer.validated_data["document"]
        if not isinstance(document, dict):
            raise ApplicationError(
                "The document must be a JSON object.", fields={"document": ["must be an object"]}
            )
        host = _host_facts(serializer.validated_data.get("host"))
        return Response({"findings": [f.as_dict() for f in lint(document, host=host)]})


class DocumentLaunchCommandApi(APIView):
    """The launch command for a document without storing it (any role)."""

    # It computes and stores nothing: a read token may POST it (accounts.authentication).
    token_scope = "read"

    permission_classes = (IsViewer,)

    @extend_schema(request=DocumentInput, responses=LAUNCH_OUTPUT)
    @idempotent
    def post(self, request: Request) -> Response:
        refuse_unknown_fields(request.data, ("document",))
        serializer = DocumentInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            command = build_launch_command(
                serializer.validated_data["document"], **_launch_params(request)
            )
        except DocumentError as exc:
            raise _document_problem(exc) from exc
        except (TypeError, AttributeError) as exc:
            raise ApplicationError(
                "The document must be a JSON object.", fields={"document": ["must be an object"]}
            ) from exc
        return Response(command.as_dict())


class ImportCommandApi(APIView):
    """A command line → a configuration document (not stored: POST it to create)."""

    # It computes and stores nothing: a read token may POST it (accounts.authentication).
    token_scope = "read"

    permission_classes = (IsViewer,)

    class ImportCommandInputSerializer(serializers.Serializer[Any]):
        command = serializers.CharField()
        engine = serializers.ChoiceField(choices=list(ENGINES), required=False)
        engine_version = serializers.CharField(required=False)
        image = serializers.CharField(required=False)
        sampling = serializers.DictField(required=False)
        placement = serializers.DictField(required=False)
        model_sha256 = serializers.CharField(required=False)
        draft_sha256 = serializers.CharField(required=False)

    @extend_schema(
        request=ImportCommandInputSerializer,
        responses=inline_serializer(
            "ImportedCommand",
            {
                "document": serializers.JSONField(),
                "config_hash": serializers.CharField(),
                "method": serializers.CharField(),
                "ignored": serializers.ListField(child=serializers.CharField()),
            },
        ),
    )
    @idempotent
    def post(self, request: Request) -> Response:
        refuse_unknown_fields(
            request.data,
            (
                "command",
                "engine",
                "engine_version",
                "image",
                "sampling",
                "placement",
                "model_sha256",
                "draft_sha256",
            ),
        )
        serializer = self.ImportCommandInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        try:
            result = import_command(data.pop("command"), **data)
        except ImportProblem as exc:
            raise ApplicationError(str(exc), fields={"command": [str(exc)]}) from exc
        except DocumentError as exc:
            raise _document_problem(exc) from exc
        ident = identity(result.document)
        return Response(
            {
                "document": result.document,
                "config_hash": ident.config_hash,
                "method": ident.method,
                "ignored": result.ignored,
            }
        )
