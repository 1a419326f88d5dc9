"""Writes for verdicts: recompute an experiment's verdict; store it only when it changed.

A new verdict row supersedes the latest one and never edits it (the database refuses UPDATE), so
the history of what was concluded when stays. When the states change, ``verdict.changed`` is
announced through ``notifications.emit``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

import notifications
from experiments.models import Experiment
from verdicts import selectors
from verdicts.models import CandidateVerdict, CellVerdict, Verdict, VerdictRequest


def _states(document: dict[str, Any]) -> dict[str, Any]:
    return {
        "candidates": {c["arm"]: [c["state"], c["workloads"]] for c in document["candidates"]},
        "cells": {
            f"{cell['workload']}/{cell['load']}/{entry['arm']}": entry["state"]
            for cell in document["cells"]
            for entry in cell["candidates"]
        },
    }


@transaction.atomic
def verdict_recompute(*, experiment_id: int) -> Verdict | None:
    """The experiment's verdict from its stored runs: a new row when anything it stands on
    changed (runs, attempts, objectives, analysis version), else the latest one. None before the
    experiment is locked or while none of its runs has finished."""
    # scipy takes seconds to import: only a recomputation pays it, not the worker's start.
    from analysis.verdict import ANALYSIS_VERSION, compute_verdict

    # One recomputation per experiment at a time: the lock orders concurrent tasks.
    experiment = Experiment.objects.select_for_update().filter(pk=experiment_id).first()
    if experiment is None or experiment.locked_at is None:
        return None
    engine_input, used = selectors.experiment_input(experiment=experiment)
    if not used:
        return None
    fingerprint = hashlib.sha256(
        json.dumps(
            {"runs": used, "objectives": experiment.objectives_hash, "analysis": ANALYSIS_VERSION},
            sort_keys=True,
        ).encode()
    ).hexdigest()
    latest = selectors.verdict_latest(experiment=experiment)
    if latest is not None and latest.inputs_sha256 == fingerprint:
        return latest
    document = compute_verdict(engine_input)
    # The row's id and predecessor are the document's verdict_id and supersedes (filled on read).
    document["verdict_id"] = None
    document["supersedes"] = None
    verdict = Verdict.objects.create(
        experiment=experiment,
        supersedes=latest,
        analysis_version=ANALYSIS_VERSION,
        objectives_sha256=experiment.objectives_hash,
        inputs=used,
        inputs_sha256=fingerprint,
        document=document,
    )
    arms = {arm.label: arm for arm in experiment.arms.all()}
    CandidateVerdict.objects.bulk_create(
        CandidateVerdict(
            verdict=verdict, arm=arms[c["arm"]], state=c["state"], workloads=c["workloads"]
        )
        for c in document["candidates"]
    )
    CellVerdict.objects.bulk_create(
        CellVerdict(
            verdict=verdict,
            arm=arms[entry["arm"]],
            workload=cell["workload"],
            load=cell["load"],
            state=entry["state"],
            runs_needed=entry["runs_needed"],
            runs_needed_at_least=entry["runs_needed_at_least"],
            document=entry,
        )
        for cell in document["cells"]
        for entry in cell["candidates"]
    )
    before = None if latest is None else _states(latest.document)
    after = _states(document)
    if before != after:
        payload = {
            "experiment": experiment.pk,
            "verdict": verdict.pk,
            "supersedes": None if latest is None else latest.pk,
            "candidates": [
                {"arm": c["arm"], "state": c["state"], "workloads": c["workloads"]}
                for c in document["candidates"]
            ],
            "changed_cells": sorted(
                key
                for key, state in after["cells"].items()
                if before is None or before["cells"].get(key) != state
            ),
            "emulated_label": document["emulated_label"],
            "url_path": f"/experiments/{experiment.pk}/",
        }
        # emit writes its deliveries in this transaction: a rolled-back verdict announces nothing.
        notifications.emit("verdict.changed", payload)
    return verdict


def verdict_current_id(*, experiment_id: int) -> int | None:
    """The id of the experiment's current verdict (None before the first)."""
    return (
        Verdict.objects.filter(experiment_id=experiment_id)
        .order_by("-id")
        .values_list("pk", flat=True)
        .first()
    )


def verdict_request_note(*, experiment_id: int) -> int:
    """Count one more request for the experiment's verdict; the count the task carries."""
    with transaction.atomic():
        VerdictRequest.objects.get_or_create(experiment_id=experiment_id)
        VerdictRequest.objects.filter(pk=experiment_id).update(requested=F("requested") + 1)
        return int(
            VerdictRequest.objects.filter(pk=experiment_id).values_list("requested", flat=True)[0]
        )


def verdict_request_overtaken(*, experiment_id: int, request: int) -> bool:
    """True when a newer request than ``request`` is pending and the stored verdict is fresh
    enough (``SPECPORTAL_VERDICT_STALE_SECONDS``) to wait for it: the newer task computes on more
    runs. The last request of a burst is never overtaken, so the final verdict is always computed."""
    latest = (
        VerdictRequest.objects.filter(pk=experiment_id).values_list("requested", flat=True).first()
    )
    if latest is None or latest <= request:
        return False
    stale_after = timedelta(seconds=settings.SPECPORTAL_VERDICT_STALE_SECONDS)
    return Verdict.objects.filter(
        experiment_id=experiment_id, computed_at__gte=timezone.now() - stale_after
    ).exists()


@transaction.atomic
def verdict_follow_up_create(
    *, user: Any, experiment_id: int, arm: str, workload: str | None = None
) -> Experiment:
    """The verdict's K-by-batch schedule advice for ``arm``, measured: the advised candidate
    configuration is stored, and a draft experiment (not started) compares it with the baseline
    and the candidate it came from on the advice's workload, at the same loads, objectives, hosts
    and repetitions. Refused with the advice's own reason when there is none (too few load
    levels, a method the schedule does not support, no per-position acceptance)."""
    from configurations.services import configuration_create
    from experiments import services as experiments
    from specportal.api.errors import ApplicationError

    experiment = Experiment.objects.get(pk=experiment_id)
    document = selectors.verdict_document(experiment_id=experiment_id)
    if document is None:
        raise ApplicationError(
            f"Experiment {experiment_id} has no verdict yet: there is no advice to measure.",
            code="no_verdict",
            status_code=409,
        )
    arms = {a.label: a for a in experiment.arms.select_related("configuration")}
    candidate = next((c for c in document["candidates"] if c["arm"] == arm), None)
    if candidate is None or arm not in arms:
        labels = ", ".join(c["arm"] for c in document["candidates"])
        raise ApplicationError(
            "No such candidate.", fields={"arm": [f"{arm!r} is not a candidate ({labels})"]}
        )
    advice = [a for a in candidate.get("advice", []) if workload in (None, a["workload"])]
    if workload is not None and not advice:
        raise ApplicationError(
            "No such workload.", fields={"workload": [f"{workload!r} is not in the experiment"]}
        )
    usable = next((a for a in advice if a["available"] and a.get("configuration")), None)
    if usable is None:
        reasons = "; ".join(f"{a['workload']}: {a['reason']}" for a in advice)
        raise ApplicationError(
            f"No schedule advice for {arm}: {reasons}.", code="no_advice", status_code=409
        )
    source = arms[arm].configuration
    advised, _ = configuration_create(
        document=usable["configuration"],
        name=f"{source.name or arm} — advised K schedule ({usable['workload']})"[:200],
        description=f"K-by-batch schedule advised by verdict {document['verdict_id']} of "
        f"experiment {experiment_id} for {arm} on {usable['workload']}: "
        + json.dumps(usable["schedule"]),
        created_by=user,
    )
    baseline = arms[document["arms"][0]["arm"]].configuration
    if advised.pk in (source.pk, baseline.pk):
        raise ApplicationError(
            f"The advised schedule for {arm} is the configuration it already has: nothing new "
            "to measure.",
            code="no_advice",
            status_code=409,
        )
    return experiments.experiment_create(
        user=user,
        name=f"{experiment.name} — follow-up: {arm} advised K schedule"[:200],
        description=f"Measures the K-by-batch schedule that verdict {document['verdict_id']} of "
        f"experiment {experiment_id} advised for {arm} on {usable['workload']} ({usable['reason']})"
        ", against the baseline and the configuration it came from.",
        baseline=baseline,
        candidates=[source, advised],
        labels=[document["arms"][0]["arm"], arm, f"{arm}-advised"],
        workloads=[w for w in experiment.workloads if w["name"] == usable["workload"]],
        loads=experiment.loads,
        objectives=experiment.objectives,
        hosts=list(experiment.hosts.all()),
        repetitions=experiment.repetitions,
        warmup_requests=experiment.warmup_requests,
        cache_policy=experiment.cache_policy,
        failure_policy=experiment.failure_policy,
        max_failed_runs=experiment.max_failed_runs,
    )
