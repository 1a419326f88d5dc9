"""Test data for approvals: a deployment, finished experiments, and stored verdict documents.

Until the ``verdicts`` app stores verdicts, the evidence rules read them through
``SPECPORTAL_VERDICT_SOURCE``; these tests point it at :data:`STORED`, documents in the verdict
JSON's shape (built from ``tests/analysis/fixtures/verdict-example.json`` and checked with
``analysis.verdict_schema.check_verdict``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from accounts import roles
from accounts.services import user_create_or_update
from analysis.verdict_schema import check_verdict
from approvals import services
from approvals.models import ChangeRequest, Deployment
from configurations.models import FrozenConfiguration
from experiments.models import Experiment
from experiments.services import experiment_create, experiment_start
from runs.models import Run
from tests.fixtures import LOADS, OBJECTIVES, WORKLOADS, Setup, create_kwargs, register_host

EXAMPLE = json.loads(
    (Path(__file__).parents[1] / "analysis" / "fixtures" / "verdict-example.json").read_text()
)
STORED: dict[int, dict[str, Any]] = {}
SOURCE = f"{__name__}.stored_verdict"


def stored_verdict(experiment_id: int) -> dict[str, Any] | None:
    return STORED.get(experiment_id)


@pytest.fixture
def verdicts() -> Iterator[dict[int, dict[str, Any]]]:
    STORED.clear()
    with override_settings(SPECPORTAL_VERDICT_SOURCE=SOURCE):
        yield STORED
    STORED.clear()


def _example_candidate(state: str) -> dict[str, Any]:
    for cell in EXAMPLE["cells"]:
        for candidate in cell["candidates"]:
            if candidate["state"] == state:
                return copy.deepcopy(candidate)
    raise AssertionError(f"no {state} candidate in the example")


def verdict_document(
    experiment: Experiment,
    states: Mapping[tuple[str, str], str],
    *,
    verdict_id: int = 1,
    supersedes: int | None = None,
    emulated: bool = False,
    imported: bool = False,
) -> dict[str, Any]:
    """The experiment's verdict with its (only) candidate in the given state per cell."""
    arms = list(experiment.arms.select_related("configuration").order_by("position"))
    doc: dict[str, Any] = copy.deepcopy(EXAMPLE)
    doc.update(
        verdict_id=verdict_id,
        supersedes=supersedes,
        experiment_id=experiment.pk,
        objectives_sha256=experiment.objectives_hash,
        imported=imported,
    )
    doc["emulated"] = emulated
    doc["emulated_label"] = "emulated: demonstrates SpecPortal, not evidence" if emulated else None
    doc["arms"] = [
        {
            **copy.deepcopy(EXAMPLE["arms"][min(i, 1)]),
            "arm": arm.label,
            "role": "baseline" if i == 0 else "candidate",
            "method": arm.configuration.method,
            "config_hash": arm.configuration.config_hash,
            "target_hash": arm.configuration.target_hash,
            "proposal_hash": arm.configuration.proposal_hash,
        }
        for i, arm in enumerate(arms)
    ]
    cells = []
    for (workload, load), state in states.items():
        candidate = _example_candidate(state)
        candidate["arm"] = arms[1].label
        cells.append({**copy.deepcopy(EXAMPLE["cells"][0]), "workload": workload, "load": load,
                      "candidates": [candidate]})  # fmt: skip
    doc["cells"] = cells
    overall = copy.deepcopy(EXAMPLE["candidates"][0])
    overall["arm"] = arms[1].label
    worst = "DROP" if "DROP" in states.values() else (
        "INCONCLUSIVE" if "INCONCLUSIVE" in states.values() else "KEEP")  # fmt: skip
    overall["state"] = worst
    overall["workloads"] = {w: worst for (w, _) in states}
    doc["candidates"] = [overall]
    check_verdict(doc, strict=False)
    return doc


ALL_KEEP: dict[tuple[str, str], str] = {
    (str(w["name"]), str(lo["name"])): "KEEP" for w in WORKLOADS for lo in LOADS
}


def person(username: str, *role_names: str) -> User:
    return user_create_or_update(username=username, password=None, role_names=role_names)


def finished_experiment(
    s: Setup,
    *,
    candidate: FrozenConfiguration | None = None,
    user: User | None = None,
    hosts: list[Any] | None = None,
    objectives: dict[str, Any] | None = None,
    workloads: list[dict[str, Any]] | None = None,
    run_offset_seconds: float = 1.0,
) -> Experiment:
    """An experiment (baseline vs one candidate) started for real, then its runs marked done.

    The start is the real service (checks, plan, objectives lock); measuring is not what these
    tests are about, so the runs are then marked DONE, started ``run_offset_seconds`` after the
    lock (negative: before it).
    """
    candidate = candidate or s.ngram
    kwargs = create_kwargs(
        s,
        user=user or s.experimenter,
        candidates=[candidate],
        labels=["baseline", candidate.name or "candidate"],
        hosts=hosts or [s.hosts[0]],
        repetitions=1,
    )
    if objectives is not None:
        kwargs["objectives"] = objectives
    if workloads is not None:
        kwargs["workloads"] = workloads
    experiment = experiment_start(experiment=experiment_create(**kwargs))
    experiment.refresh_from_db()
    assert experiment.locked_at is not None
    started = experiment.locked_at + timedelta(seconds=run_offset_seconds)
    Run.objects.filter(experiment=experiment).update(
        status=Run.Status.DONE, started_at=started, finished_at=started + timedelta(seconds=5)
    )
    Experiment.objects.filter(pk=experiment.pk).update(status=Experiment.Status.DONE)
    experiment.refresh_from_db()
    return experiment


def real_host(name: str = "gpu-real") -> Any:
    host, _ = register_host(name, emulated=False)
    return host


def deployment(s: Setup, manager: User, **changes: Any) -> Deployment:
    kwargs: dict[str, Any] = {
        "user": manager,
        "name": "chat-prod",
        "owner_team": "serving",
        "configuration": s.baseline,
        "workloads": copy.deepcopy(WORKLOADS),
        "loads": copy.deepcopy(LOADS),
        "objectives": copy.deepcopy(OBJECTIVES),
    }
    kwargs.update(changes)
    return services.deployment_create(**kwargs)


def opened(
    s: Setup, dep: Deployment, experiment: Experiment, *, to: FrozenConfiguration | None = None,
    author: User | None = None,
) -> ChangeRequest:  # fmt: skip
    cr: ChangeRequest = services.change_request_create(
        user=author or s.experimenter,
        deployment=dep,
        to_configuration=to or s.ngram,
        reason="n-gram speculation keeps every objective at both loads",
        evidence=[experiment],
        open_now=True,
    )
    return cr


MANAGER = roles.MANAGER
OPERATOR = roles.OPERATOR
