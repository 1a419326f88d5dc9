"""Writes for frozen configurations (keyword-only, typed, atomic)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import IntegrityError, transaction

from configurations.models import EDITABLE_FIELDS, FrozenConfiguration
from specportal.api.errors import ApplicationError
from specportal.api.input import labels_clean
from specportal.engines.document import DocumentError, prepare


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
    if name is not None:
        config.name = name
    if description is not None:
        config.description = description
    if labels is not None:
        config.labels = labels_clean(labels)
    config.save(update_fields=list(EDITABLE_FIELDS))
    return config


@transaction.atomic
def configuration_delete(*, config: FrozenConfiguration) -> None:
    """Delete an unreferenced configuration (PROTECT foreign keys refuse otherwise)."""
    from django.db.models import ProtectedError

    try:
        config.delete()
    except ProtectedError as exc:
        raise ApplicationError(
            "This configuration is referenced (by experiments or runs) and cannot be deleted.",
            code="protected",
            status_code=409,
        ) from exc
