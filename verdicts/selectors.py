"""Reads for verdicts, and the verdict engine's input built from an experiment's stored runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from experiments.models import Experiment
from runs.models import RequestRecord, Run
from verdicts.models import Verdict

if TYPE_CHECKING:
    from analysis.verdict import ExperimentInput, LoadInput

# Runs a verdict stands on: a finished run's result, and a failed run (a candidate that never
# served is a DROP). Incomplete and cancelled runs are partial repetitions and are left out.
INPUT_STATES: Final = (Run.Status.DONE, Run.Status.FAILED)
# A failed run with no result failed to start (the engine's own failure is the candidate's)
# unless the portal failed it for a reason of the portal's: its agent vanished (the lease ran
# out) or its upload could not be read (runs.services / runs.ingest write these notes).
NOT_THE_CANDIDATES: Final = ("lease expired", "unreadable result upload")


def verdict_latest(*, experiment: Experiment) -> Verdict | None:
    return Verdict.objects.filter(experiment=experiment).order_by("-id").first()


def verdict_history(*, experiment: Experiment) -> list[Verdict]:
    return list(
        Verdict.objects.filter(experiment=experiment)
        .order_by("-id")
        .prefetch_related("candidates__arm")
    )


def verdict_document(*, experiment_id: int) -> dict[str, Any] | None:
    """The experiment's current verdict document (the pages' seam: ``experiments.verdicts``)."""
    verdict = Verdict.objects.filter(experiment_id=experiment_id).order_by("-id").first()
    return None if verdict is None else verdict_as_document(verdict)


def verdict_final_document(*, experiment_id: int) -> dict[str, Any] | None:
    """The current verdict document when it stands on every run of the experiment that has
    ended (done or failed), else None: the worker has not caught up with the last run yet."""
    verdict = Verdict.objects.filter(experiment_id=experiment_id).order_by("-id").first()
    if verdict is None:
        return None
    ended = set(
        Run.objects.filter(experiment_id=experiment_id, status__in=INPUT_STATES).values_list(
            "pk", "attempt"
        )
    )
    used = {(entry["run"], entry["attempt"]) for entry in verdict.inputs}
    return verdict_as_document(verdict) if used == ended else None


def verdict_as_document(verdict: Verdict) -> dict[str, Any]:
    """The stored document with the row's own id and predecessor filled in."""
    document: dict[str, Any] = dict(verdict.document)
    document["verdict_id"] = verdict.pk
    document["supersedes"] = verdict.supersedes_id
    return document


def verdict_summary(*, experiment: Experiment) -> dict[str, Any] | None:
    """What the experiment's detail shows: the latest verdict's states per candidate."""
    verdict = verdict_latest(experiment=experiment)
    if verdict is None:
        return None
    document = verdict.document
    return {
        "verdict_id": verdict.pk,
        "supersedes": verdict.supersedes_id,
        "computed_at": document.get("computed_at"),
        "analysis_version": verdict.analysis_version,
        "objectives_sha256": verdict.objectives_sha256,
        "emulated_label": document.get("emulated_label"),
        "candidates": [
            {"arm": c["arm"], "state": c["state"], "workloads": c["workloads"]}
            for c in document.get("candidates", [])
        ],
        "url": f"/api/v1/experiments/{experiment.pk}/verdict/",
    }


def _load_input(load: Mapping[str, Any]) -> LoadInput:
    from analysis.verdict import LoadInput

    concurrency = load.get("concurrency")
    rate = load.get("request_rate")
    return LoadInput(
        str(load["name"]),
        int(concurrency) if isinstance(concurrency, int) else None,
        float(rate) if isinstance(rate, int | float) and rate != float("inf") else None,
    )


def _records(run_ids: list[int], with_timings: bool) -> dict[int, list[dict[str, Any]]]:
    """Per run, its measured requests as the engine reads them: pairing and text for the text
    guard, and (only when an SLO figure must be recomputed) the timings."""
    fields = ["run_id", "index", "success", "text_hash"]
    if with_timings:
        fields += ["sent", "chunk_times", "chunk_tokens", "output_tokens"]
    out: dict[int, list[dict[str, Any]]] = {}
    rows = RequestRecord.objects.filter(run_id__in=run_ids).order_by("run_id", "index")
    for row in rows.values_list(*fields).iterator(chunk_size=20_000):
        record = dict(zip(fields, row, strict=True))
        record["text_sha256"] = record.pop("text_hash") or None
        out.setdefault(record.pop("run_id"), []).append(record)
    return out


def experiment_input(*, experiment: Experiment) -> tuple[ExperimentInput, list[dict[str, Any]]]:
    """The engine's input for ``experiment`` and the list of runs (id, attempt, status) it uses."""
    # The engine needs scipy, seconds to import: loaded when a verdict is computed, never at the
    # start of the web process or the worker.
    from analysis.verdict import ArmInput, ExperimentInput, RunInput

    arms = list(experiment.arms.select_related("configuration").order_by("position"))
    runs = list(
        Run.objects.filter(experiment=experiment, status__in=INPUT_STATES)
        .select_related("arm", "host")
        .order_by("sequence")
    )
    objectives = experiment.objectives
    slos = objectives.get("slos") or {}
    slo_keys = {"slo_attainment", "request_goodput"}
    needs_timings = (
        bool(slos)
        and any(o["metric"] in slo_keys for o in objectives.get("objectives", []))
        and any(r.summary is not None and r.summary.get("slo_attainment") is None for r in runs)
    )
    records = _records([r.pk for r in runs if r.summary is not None], needs_timings)
    inputs: list[RunInput] = []
    used: list[dict[str, Any]] = []
    for run in runs:
        measured = run.status == Run.Status.DONE and run.summary is not None
        requests = records.get(run.pk)
        inputs.append(
            RunInput(
                id=run.pk,
                arm=run.arm.label,
                workload=run.workload,
                load=run.load,
                repetition=run.repetition,
                summary=run.summary if measured else None,
                acceptance=run.acceptance or {},
                prefix_cache_hit_fraction=run.prefix_cache_hit_fraction,
                host=run.host.name if run.host is not None else None,
                # The tool that measured it: an imported run's file format (the same name
                # ``specportal compare`` reads from the file), SpecPortal's own otherwise.
                tool=run.source_format or "specportal",
                emulated=run.host.emulated if run.host is not None else False,
                mismatches=list(run.mismatches or []),
                server=run.server or {},
                # Without timings the records serve pairing and text only (never SLO figures).
                requests=requests or None,
                error=run.error,
                draft_alone=run.draft_alone_configuration_id is not None,
                failed_to_start=(not measured)
                and not any(note in run.error for note in NOT_THE_CANDIDATES),
            )
        )
        used.append({"run": run.pk, "attempt": run.attempt, "status": run.status})
    imported_arms = {run.arm.label for run in runs if run.imported}
    x = ExperimentInput(
        arms=[
            ArmInput(
                arm.label,
                arm.configuration.document,
                arm.configuration.config_hash,
                arm.configuration.target_hash,
                arm.configuration.proposal_hash,
                imported=arm.label in imported_arms,
            )
            for arm in arms
        ],
        workloads=[str(w["name"]) for w in experiment.workloads],
        loads=[_load_input(load) for load in experiment.loads],
        objectives=objectives,
        objectives_sha256=experiment.objectives_hash,
        runs=inputs,
        experiment_id=experiment.pk,
    )
    return x, used
