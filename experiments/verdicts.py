"""The experiment's current verdict document, for pages (issue 11's shape, ``analysis/VERDICT.md``).

The verdicts app stores verdicts; until it has landed there is none, and every page says
"verdict pending" — a verdict is never made up here.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps

from experiments.models import Experiment


def experiment_verdict(experiment: Experiment) -> dict[str, Any] | None:
    """The newest stored verdict document of ``experiment``, or ``None``."""
    if not apps.is_installed("verdicts"):
        return None
    try:
        from verdicts.selectors import verdict_document
    except ImportError:
        return None
    document: dict[str, Any] | None = verdict_document(experiment_id=experiment.pk)
    return document


EMULATED_LABEL = "emulated: demonstrates SpecPortal, not evidence"


def verdict_view(
    verdict: dict[str, Any] | None, *, arms: list[str], workloads: list[str], loads: list[str]
) -> dict[str, Any]:
    """The verdict arranged for the page: per candidate (in arm order) its overall and
    per-workload states, and per cell each candidate's entry; ``pending`` where no verdict
    exists. Nothing is computed here: every state, number and sentence is the document's."""
    candidates_doc = {c["arm"]: c for c in (verdict or {}).get("candidates", [])}
    cells_doc = {(c["workload"], c["load"]): c for c in (verdict or {}).get("cells", [])}
    candidates = []
    for arm in arms[1:]:
        entry = candidates_doc.get(arm)
        candidates.append(
            {
                "arm": arm,
                "state": entry.get("state") if entry else None,
                "workloads": [
                    {"workload": w, "state": (entry or {}).get("workloads", {}).get(w)}
                    for w in workloads
                ],
                "reasons": (entry or {}).get("reasons", []),
                "capacity": ((entry or {}).get("capacity") or {}).get("workloads", {}),
                "flags": (entry or {}).get("flags", []),
                "advice": [a for a in (entry or {}).get("advice", []) if a.get("available")],
                # said plainly on the page: why a workload has no schedule advice
                "advice_unavailable": [
                    a for a in (entry or {}).get("advice", []) if not a.get("available")
                ],
            }
        )
    cells = []
    for workload in workloads:
        for load in loads:
            doc = cells_doc.get((workload, load))
            by_arm = {c["arm"]: c for c in (doc or {}).get("candidates", [])}
            cells.append(
                {
                    "workload": workload,
                    "load": load,
                    "cell": f"{workload}/{load}",
                    "candidates": [
                        {
                            "arm": arm,
                            "entry": by_arm.get(arm),
                            "state": (by_arm.get(arm) or {}).get("state"),
                        }
                        for arm in arms[1:]
                    ],
                }
            )
    return {
        "document": verdict,
        "candidates": candidates,
        "cells": cells,
        "method": (verdict or {}).get("method"),
        "emulated": bool((verdict or {}).get("emulated")),
        "emulated_label": (verdict or {}).get("emulated_label") or EMULATED_LABEL,
    }


def cell_verdict(view: dict[str, Any], cell: str) -> dict[str, Any] | None:
    return next((c for c in view["cells"] if c["cell"] == cell), None)
