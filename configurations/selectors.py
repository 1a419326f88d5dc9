"""Reads for frozen configurations."""

from __future__ import annotations

from django.db.models import QuerySet

from configurations.models import FrozenConfiguration


def configuration_list(
    *,
    engine: str | None = None,
    method: str | None = None,
    target_hash: str | None = None,
    proposal_hash: str | None = None,
    label: str | None = None,
    search: str | None = None,
) -> QuerySet[FrozenConfiguration]:
    """Configurations, newest first. ``label`` is ``key`` or ``key=value``."""
    qs = FrozenConfiguration.objects.select_related("created_by")
    if engine:
        qs = qs.filter(engine=engine)
    if method:
        qs = qs.filter(method=method.lower())
    if target_hash:
        qs = qs.filter(target_hash=target_hash)
    if proposal_hash:
        qs = qs.filter(proposal_hash=proposal_hash)
    if label:
        key, sep, value = label.partition("=")
        qs = qs.filter(labels__has_key=key) if not sep else qs.filter(**{f"labels__{key}": value})
    if search:
        qs = qs.filter(name__icontains=search)
    return qs
