"""Where the evidence rules read an experiment's verdict: the verdict JSON (``analysis/VERDICT.md``)
and nothing else.

``SPECPORTAL_VERDICT_SOURCE`` names a function ``(experiment_id) -> verdict document | None``
returning the experiment's current (not superseded) verdict. The default reads the ``verdicts``
app when it is installed, and answers ``None`` ("verdict pending") until then; tests point it at
stored verdict documents.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.utils.module_loading import import_string

DEFAULT_SOURCE = "approvals.verdict_source.from_verdicts_app"


def from_verdicts_app(experiment_id: int) -> dict[str, Any] | None:
    if not apps.is_installed("verdicts"):
        return None
    from verdicts import selectors

    document: dict[str, Any] | None = selectors.verdict_document(experiment_id=experiment_id)
    return document


def verdict_of(experiment_id: int) -> dict[str, Any] | None:
    source = import_string(getattr(settings, "SPECPORTAL_VERDICT_SOURCE", DEFAULT_SOURCE))
    document: dict[str, Any] | None = source(experiment_id)
    return document
