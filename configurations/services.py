"""Writes for frozen configurations (keyword-only, typed, atomic)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import IntegrityError, transaction

import audit
from audit.services import ObjectRef
from configurations.models import EDITABLE_FIELDS, FrozenConfiguration
from specportal.api.errors import ApplicationError
from specportal.api.input import labels_clean
from specportal.engines.document import DocumentError, prepare
from specportal.protocol.invisible import invisible_formatting

# What an audit event keeps of a configuration: its identity (the document is immutable and named
# by its hash) and what can change.
AUDITED_FIELDS = ("config_hash", "engine", "method", "name", "description", "labels", "created_by")


@transaction.atomic
def configuration_create(
    *,
    document: Any,
    name: str = "",
    description: str = "",
    labels: Mapping[str, str] | None = None,
    created_by: User | AnonymousUser | None = None,
) -> tuple[FrozenConfiguration, bool]:
    """Store a configuration, or return the stored one with the same identity (``created`` False).

    Name, description and labels are not identity: posting the same document under another name
    returns the existing configuration unchanged.
    """
    try:
        normalised, ident = prepare(document)
    except DocumentError as exc:
        fields = {
            f"document.{path}" if path else "document": msgs for path, msgs in exc.problems.items()
        }
        raise ApplicationError(
            f"The configuration document is invalid: {exc}", fields=fields
        ) from exc
    clean_labels = labels_clean(labels)
    existing = FrozenConfiguration.objects.filter(config_hash=ident.config_hash).first()
    if existing is not None:
        return existing, False
    user = created_by if isinstance(created_by, User) else None
    try:
        with transaction.atomic():
            config = FrozenConfiguration.objects.create(
                config_hash=ident.config_hash,
                target_hash=ident.target_hash,
                proposal_hash=ident.proposal_hash,
                engine=normalised["engine"],
                method=ident.method,
                document=normalised,
                name=name,
                description=description,
                labels=clean_labels,
                created_by=user,
            )
    except IntegrityError:
        # Another request stored the same identity between our lookup and insert.
        return FrozenConfiguration.objects.get(config_hash=ident.config_hash), False
    audit.record(
        action="configuration.create",
        target=config,
        after=audit.snapshot(config, fields=AUDITED_FIELDS),
        actor=user,
    )
    return config, True


@transaction.atomic
def configuration_update(
    *,
    config: FrozenConfiguration,
    name: str | None = None,
    description: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> FrozenConfiguration:
    """Change what is not identity: name, description, labels."""
    before = audit.snapshot(config, fields=AUDITED_FIELDS)
    if name is not None:
        config.name = name
    if description is not None:
        config.description = description
    if labels is not None:
        config.labels = labels_clean(labels)
    config.save(update_fields=list(EDITABLE_FIELDS))
    audit.record(
        action="configuration.update",
        target=config,
        before=before,
        after=audit.snapshot(config, fields=AUDITED_FIELDS),
    )
    return config


@transaction.atomic
def configuration_delete(*, config: FrozenConfiguration) -> None:
    """Delete an unreferenced configuration (PROTECT foreign keys refuse otherwise)."""
    from django.db.models import ProtectedError

    before = audit.snapshot(config, fields=AUDITED_FIELDS)
    target = ObjectRef("configurations.frozenconfiguration", config.pk, str(config))
    try:
        config.delete()
    except ProtectedError as exc:
        raise ApplicationError(
            "This configuration is referenced (by experiments or runs) and cannot be deleted.",
            code="protected",
            status_code=409,
        ) from exc
    audit.record(action="configuration.delete", target=target, before=before)


def configuration_resolve(
    *, value: Any, path: str, created_by: User | AnonymousUser | None = None
) -> FrozenConfiguration:
    """An arm's configuration from an experiment document: a stored id, an inline ``document``
    (stored by content: an identical document reuses the stored configuration), or an
    ``import_command`` (the engine's own command line, turned into a document first).

    ``{"id": 3}`` or ``3``; ``{"document": {...}, "name": "..."}``; ``{"import_command": "vllm
    serve ...", "name": "...", "engine_version": "0.30.0"}``. Errors name ``path``.
    """
    from specportal.engines.importer import ImportProblem, import_command

    if isinstance(value, int) and not isinstance(value, bool):
        value = {"id": value}
    if not isinstance(value, dict):
        raise ApplicationError(
            "An arm needs a configuration id, a document or an import_command.",
            fields={path: ["an id, {'document': {...}} or {'import_command': '...'}"]},
        )
    keys = set(value)
    allowed = {"id", "document", "import_command", "name", "engine_version", "image"}
    unknown = sorted(keys - allowed)
    if unknown:
        raise ApplicationError(
            "Unknown keys.", fields={f"{path}.{k}": ["unknown key"] for k in unknown}
        )
    kinds = [k for k in ("id", "document", "import_command") if k in value]
    if len(kinds) != 1:
        raise ApplicationError(
            "Give exactly one of id, document, import_command.",
            fields={path: [f"found {', '.join(kinds) or 'none'}"]},
        )
    if "id" in value:
        found = FrozenConfiguration.objects.filter(pk=value["id"]).first()
        if found is None:
            raise ApplicationError("No such configuration.", fields={f"{path}.id": ["not found"]})
        return found
    name = str(value.get("name") or "")
    if why := invisible_formatting(name):
        raise ApplicationError("The arm's name is not valid.", fields={f"{path}.name": [why]})
    if "import_command" in value:
        try:
            document = import_command(
                str(value["import_command"]),
                engine_version=value.get("engine_version"),
                image=value.get("image"),
            ).document
        except ImportProblem as exc:
            raise ApplicationError(
                "The command line cannot be imported.",
                fields={f"{path}.import_command": [str(exc)]},
            ) from None
    else:
        document = value["document"]
    try:
        config, _ = configuration_create(document=document, name=name, created_by=created_by)
    except ApplicationError as exc:
        fields = {f"{path}.{k}": v for k, v in exc.fields.items()}
        raise ApplicationError(exc.message, fields=fields or {path: [exc.message]}) from None
    return config
