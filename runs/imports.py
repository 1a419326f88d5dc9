"""Imported runs: other tools' result files filling the cells of an import-mode experiment.

``run_import`` reads every file whole (``specportal.formats``) and checks every run against the
experiment (arm, cell, repetition, the arm's model) before it writes anything: one bad file, line,
field or contradiction and the whole upload is refused with the paths, nothing saved. An identical
upload (same file SHA-256 and run index into the same experiment) answers the runs it made the
first time. A measured experiment's runs are never replaced: imports go to import-mode
experiments only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from runs.models import RequestRecord, Run
from specportal.api.errors import ApplicationError
from specportal.engines.document import MODEL_KEY
from specportal.formats import FormatError, RunFile, read_files


@dataclass
class Imported:
    run: Run
    created: bool
    file: str


def _model_matches(configured: str | None, found: str | None) -> bool:
    """The file's model is the arm's: the same id, or a local path ending in it."""
    if not configured or not found:
        return True  # nothing to contradict (the reason is kept in the run's notes)
    a, b = configured.rstrip("/"), found.rstrip("/")
    return a == b or b.endswith("/" + a) or a.endswith("/" + b)


def _load_name(run: RunFile, loads: Sequence[dict[str, Any]]) -> list[str]:
    """Load levels of the experiment the file's own load fields describe."""
    names = []
    for load in loads:
        rate = load.get("request_rate")
        concurrency = load.get("concurrency")
        if rate is not None:
            same_rate = run.request_rate is not None and abs(float(rate) - run.request_rate) < 1e-9
            if same_rate and (concurrency is None or concurrency == run.max_concurrency):
                names.append(str(load["name"]))
        elif concurrency is not None and concurrency == run.max_concurrency:
            names.append(str(load["name"]))
    return names


def _problem(fields: dict[str, list[str]], path: str, message: str) -> None:
    fields.setdefault(path, []).append(message)


@transaction.atomic
def run_import(
    *,
    experiment_id: int,
    files: Sequence[tuple[str, bytes]],
    arm: str | None = None,
    cell: str | None = None,
    repetition: int | None = None,
) -> list[Imported]:
    from experiments.models import Experiment

    experiment = Experiment.objects.select_for_update().filter(pk=experiment_id).first()
    if experiment is None:
        raise ApplicationError("No such experiment.", fields={"experiment": ["not found"]},
                               status_code=404)  # fmt: skip
    if experiment.mode != Experiment.Mode.IMPORT:
        raise ApplicationError(
            "This experiment measures its runs: imported files cannot fill or replace them.",
            code="measured_experiment",
            fields={
                "experiment": ["create an experiment with mode 'import' for other tools' files"]
            },
            status_code=409,
        )
    if experiment.locked_at is None or experiment.status != Experiment.Status.RUNNING:
        raise ApplicationError(
            "Start the experiment first: its objectives are locked before any result lands.",
            code="not_started" if experiment.locked_at is None else "finished",
            fields={"experiment": [f"status {experiment.status}"]},
            status_code=409,
        )
    if not files:
        raise ApplicationError("No file.", fields={"file": ["at least one result file"]})
    try:
        runs = read_files(files)
    except FormatError as exc:
        name = exc.filename or files[0][0]
        fields = {f"file.{name}.{path}" if path != "file" else f"file.{name}": msgs
                  for path, msgs in exc.to_fields().items()}  # fmt: skip
        raise ApplicationError(f"The file is not a readable result: {exc}", fields=fields) from None
    names = {sha: name for name, data in files for sha in [_sha(data)]}
    arms = {a.label: a for a in experiment.arms.select_related("configuration")}
    workloads = [str(w["name"]) for w in experiment.workloads]
    load_names = [str(load["name"]) for load in experiment.loads]
    errors: dict[str, list[str]] = {}
    plan: list[tuple[RunFile, Any, str, str, int | None, str]] = []
    if arm is not None and arm not in arms:
        _problem(errors, "arm", f"no arm {arm!r}: choose from {', '.join(arms)}")
    chosen_arm = arms.get(arm) if arm else (next(iter(arms.values())) if len(arms) == 1 else None)
    if arm is None and chosen_arm is None:
        _problem(errors, "arm", f"the experiment has several arms: name one of {', '.join(arms)}")
    given_workload = given_load = None
    if cell is not None:
        given_workload, _, given_load = cell.partition("/")
        if given_workload not in workloads or given_load not in load_names:
            _problem(errors, "cell", f"no cell {cell!r}: workloads {', '.join(workloads)}, loads "
                     f"{', '.join(load_names)}")  # fmt: skip
    if repetition is not None and len(runs) > 1:
        _problem(errors, "repetition", f"one repetition given for {len(runs)} runs")
    for run in runs:
        where = f"file.{names.get(run.sha256, files[0][0])}" + (
            f".line {run.line}" if run.line is not None else f".run {run.index}"
        )
        workload = given_workload or (workloads[0] if len(workloads) == 1 else None)
        if workload is None:
            _problem(errors, "cell", "several workloads: give the cell (WORKLOAD/LOAD)")
            continue
        load = given_load
        if load is None:
            matching = _load_name(run, experiment.loads)
            if len(matching) != 1:
                described = (f"max_concurrency {run.max_concurrency}, request_rate "
                             f"{run.request_rate}")  # fmt: skip
                _problem(errors, f"{where}.max_concurrency",
                         f"the file's load ({described}) matches "
                         f"{'no' if not matching else 'several'} load level(s) of the "
                         "experiment: give the cell")  # fmt: skip
                continue
            load = matching[0]
        if chosen_arm is None:
            continue
        configuration = chosen_arm.configuration
        engine = configuration.document.get("engine")
        model = configuration.document.get("target", {}).get(MODEL_KEY.get(str(engine), "model"))
        if not _model_matches(model, run.model_id):
            _problem(errors, f"{where}.model_id",
                     f"the file's model {run.model_id!r} is not arm {chosen_arm.label!r}'s "
                     f"{model!r}")  # fmt: skip
        plan.append((run, chosen_arm, workload, load, repetition, where))
    if errors:
        raise ApplicationError("The import is not valid; nothing was saved.", fields=errors)

    results: list[Imported] = []
    sequence = experiment.runs.aggregate(m=Max("sequence"))["m"] or 0
    now = timezone.now()
    for run, arm_row, workload, load, wanted, where in plan:
        existing = experiment.runs.filter(source_sha256=run.sha256, source_index=run.index).first()
        if existing is not None:
            results.append(Imported(existing, False, where))
            continue
        taken = experiment.runs.filter(arm=arm_row, workload=workload, load=load)
        number = wanted or (taken.aggregate(m=Max("repetition"))["m"] or 0) + 1
        if taken.filter(repetition=number).exists():
            raise ApplicationError(
                "That repetition is filled by another file; nothing was saved.",
                code="repetition_taken",
                fields={"repetition": [f"{arm_row.label} {workload}/{load} repetition {number} "
                                       "exists: runs are never replaced"]},
                status_code=409,
            )  # fmt: skip
        sequence += 1
        results.append(Imported(_create(experiment, run, arm_row, workload, load, number,
                                        sequence, now), True, where))  # fmt: skip
    return results


def _sha(data: bytes) -> str:
    from specportal.formats.base import sha256

    return sha256(data)


def _create(
    experiment: Any, run: RunFile, arm: Any, workload: str, load: str, repetition: int,
    sequence: int, now: Any,
) -> Run:  # fmt: skip
    records = run.requests or []
    failed = sum(1 for r in records if not r.success)
    summary = dict(run.summary)
    row = Run.objects.create(
        experiment=experiment,
        arm=arm,
        host=None,
        sequence=sequence,
        workload=workload,
        load=load,
        repetition=repetition,
        position=1,
        estimated_seconds=0.0,
        status=Run.Status.DONE,
        finished_at=now,
        summary=_jsonable(summary),
        acceptance=_jsonable(run.acceptance),
        requests_total=len(records) if run.requests is not None else None,
        requests_failed=failed if run.requests is not None else None,
        error="",
        source_format=run.format,
        source_tool=run.tool,
        source_tool_version=run.tool_version or "",
        source_sha256=run.sha256,
        source_index=run.index,
        source={**run.describe(), "load": _jsonable(run.load)},
    )
    RequestRecord.objects.bulk_create(
        (
            RequestRecord(
                run=row,
                index=r.index,
                scheduled=r.scheduled,
                sent=r.sent,
                chunk_times=list(r.chunk_times),
                chunk_tokens=r.chunk_tokens,
                prompt_tokens=r.prompt_tokens,
                output_tokens=r.output_tokens,
                success=r.success,
                finish_reason=r.finish_reason or "",
                error=r.error_message or "",
                text_hash=r.text_sha256 or "",
                category=r.category or "",
            )
            for r in records
        ),
        batch_size=2000,
    )
    return row


def _jsonable(value: Any) -> Any:
    import json
    import math

    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None if math.isnan(v) else "inf"
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        return v

    return json.loads(json.dumps(clean(value), default=str))
