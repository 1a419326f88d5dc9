"""Writes for experiments: create, plan, start, advance and cancel (their runs live in ``runs``).

Dispatch keeps one run per (experiment, host) on the wire at a time: :func:`experiment_advance`
queues a host's next run when the previous one ends, so execution follows the plan exactly and the
stale-message beat task can re-publish a QUEUED run without disturbing any order.

Dependency direction: ``experiments`` drives ``runs`` (it plans, queues and cancels them) and
imports it freely; ``runs`` never imports ``experiments`` at module level (see
``runs.services.experiment_advance_later``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.db import transaction
from django.utils import timezone

import audit
from analysis.objectives import ObjectivesError, objectives_hash, validate_objectives
from configurations.models import FrozenConfiguration
from experiments.models import Arm, Experiment
from experiments.planning import assign_hosts, cells_of, estimate_run_seconds, plan_runs
from hosts.models import GpuHost
from runs.models import Run
from runs.services import ACTIVE_STATES, run_queue
from specportal.api.errors import ApplicationError
from specportal.engines.document import diff
from specportal.protocol import LoadLevel, ProtocolError, Workload, limits

# Sections of a configuration that must be equal across arms: an experiment compares proposals
# over one target on one engine build.
SHARED_SECTIONS: Final = ("engine", "engine_build", "target", "runtime", "sampling")

# The CI context an experiment may carry (shown on its page, filterable in the list).
CONTEXT_KEYS: Final = ("repository", "commit", "branch", "pull_request", "job_url")

# What an audit event keeps of an experiment (objectives in full: they are what is locked).
AUDITED_FIELDS: Final = (
    "name",
    "status",
    "workloads",
    "loads",
    "repetitions",
    "warmup_requests",
    "cache_policy",
    "failure_policy",
    "max_failed_runs",
    "calibrate_draft_cost",
    "objectives",
    "objectives_hash",
    "locked_at",
    "arms_difference_reason",
    "lint_override_reason",
    "hosts",
    "started_at",
    "finished_at",
)


def repetitions_message() -> str:
    return (
        f"must be an integer from 1 to {settings.SPECPORTAL_MAX_REPETITIONS} "
        "(SPECPORTAL_MAX_REPETITIONS)"
    )


def caps_description() -> str:
    """The caps as the API schema states them."""
    return (
        f"Caps: at most {settings.SPECPORTAL_MAX_REPETITIONS} repetitions "
        f"(SPECPORTAL_MAX_REPETITIONS), {settings.SPECPORTAL_MAX_REQUESTS_PER_LOAD} requests per "
        f"load level (SPECPORTAL_MAX_REQUESTS_PER_LOAD) and "
        f"{settings.SPECPORTAL_MAX_RUNS_PER_PLAN} runs per plan, workloads × loads × arms × "
        "repetitions (SPECPORTAL_MAX_RUNS_PER_PLAN)."
    )


def objectives_check(
    objectives: Any, *, loads: list[str] | None = None, workloads: list[str] | None = None
) -> dict[str, Any]:
    """Validate an objectives document as experiment creation does, storing nothing: the
    normalised form, or ``ApplicationError`` with ``objectives.<path>`` field errors."""
    try:
        return validate_objectives(objectives, loads=loads, workloads=workloads)
    except ObjectivesError as exc:
        fields = {
            (f"objectives.{path}" if path else "objectives"): messages
            for path, messages in exc.fields.items()
        }
        raise ApplicationError("The objectives are not valid.", fields=fields) from None


def _check_context(context: Mapping[str, Any], errors: dict[str, list[str]]) -> dict[str, str]:
    clean: dict[str, str] = {}
    for key, value in context.items():
        if key not in CONTEXT_KEYS:
            errors.setdefault(f"context.{key}", []).append(
                f"unknown key: choose from {', '.join(CONTEXT_KEYS)}"
            )
        elif not isinstance(value, str | int) or isinstance(value, bool) or len(str(value)) > 500:
            errors.setdefault(f"context.{key}", []).append("a string of at most 500 characters")
        else:
            clean[key] = str(value)
    return clean


def experiment_arms_resolve(
    *, user: AbstractBaseUser | AnonymousUser | None, baseline: Any, candidates: Sequence[Any]
) -> tuple[FrozenConfiguration, list[FrozenConfiguration]]:
    """Arms given by id or inline (``configurations.services.configuration_resolve``)."""
    from configurations.services import configuration_resolve

    creator = user if isinstance(user, User) else None
    first = configuration_resolve(value=baseline, path="baseline", created_by=creator)
    rest = [configuration_resolve(value=c, path=f"candidates.{i}", created_by=creator)
            for i, c in enumerate(candidates)]  # fmt: skip
    return first, rest


def _read_matrix(
    workloads: Any, loads: Any, errors: dict[str, list[str]], *, importing: bool = False
) -> tuple[list[Workload], list[LoadLevel]]:
    """The protocol's workloads and load levels (what the agent will be given), every problem
    with its path, plus the experiment's own rule: a quiet level. Imported files bring the
    loads they ran: no extent and no quiet level are asked of those."""
    read_workloads: list[Workload] = []
    read_loads: list[LoadLevel] = []
    try:
        read_workloads = Workload.list_from_dicts(workloads, path="workloads")
    except ProtocolError as exc:
        for path, messages in exc.fields.items():
            errors.setdefault(path or "workloads", []).extend(messages)
    try:
        read_loads = LoadLevel.list_from_dicts(
            loads,
            path="loads",
            measured=not importing,
            max_requests=settings.SPECPORTAL_MAX_REQUESTS_PER_LOAD,
        )
    except ProtocolError as exc:
        for path, messages in exc.fields.items():
            errors.setdefault(path or "loads", []).extend(messages)
    # Judged on what was given, so a level with another problem still counts (or not) here.
    given = loads if isinstance(loads, list) else []
    quiet = [x for x in given if isinstance(x, dict) and x.get("concurrency") == 1]
    if given and not importing and not any(x.get("request_rate") is None for x in quiet):
        errors.setdefault("loads", []).append(
            "needs a quiet level: closed loop at concurrency 1 (one idle request is what a "
            "single user feels)"
        )
    return read_workloads, read_loads


def arm_differences(
    baseline: FrozenConfiguration, candidate: FrozenConfiguration
) -> list[dict[str, Any]]:
    """Differences outside ``proposal`` between two arms (JSON Pointer paths)."""
    return [
        change
        for change in diff(baseline.document, candidate.document)
        if change["path"].split("/")[1] in SHARED_SECTIONS
    ]


@transaction.atomic
def experiment_create(
    *,
    user: AbstractBaseUser | AnonymousUser | None,
    name: str,
    baseline: FrozenConfiguration,
    candidates: Sequence[FrozenConfiguration],
    workloads: Any,
    loads: Any,
    objectives: Mapping[str, Any],
    hosts: Sequence[GpuHost],
    labels: Sequence[str] | None = None,
    description: str = "",
    repetitions: int = 3,
    warmup_requests: int = 0,
    cache_policy: str = Experiment.CachePolicy.FRESH_SERVER,
    failure_policy: str = Experiment.FailurePolicy.CONTINUE,
    max_failed_runs: int = 0,
    arms_difference_reason: str = "",
    mode: str = Experiment.Mode.MEASURED,
    context: Mapping[str, Any] | None = None,
    calibrate_draft_cost: bool = False,
) -> Experiment:
    """Validate the whole definition at once (every problem reported with its path)."""
    errors: dict[str, list[str]] = {}
    clean_context = _check_context(context or {}, errors)
    importing = mode == Experiment.Mode.IMPORT
    read_workloads, read_loads = _read_matrix(workloads, loads, errors, importing=importing)
    if not candidates:
        errors.setdefault("candidates", []).append("an experiment needs at least one candidate")
    if not hosts and not importing:
        errors.setdefault("hosts", []).append("an experiment needs at least one host")
    if not 1 <= repetitions <= settings.SPECPORTAL_MAX_REPETITIONS:
        errors.setdefault("repetitions", []).append(repetitions_message())
    if not 0 <= warmup_requests <= limits.MAX_WARMUP_REQUESTS:
        errors.setdefault("warmup_requests", []).append(
            f"must be an integer from 0 to {limits.MAX_WARMUP_REQUESTS}"
        )
    arms = [baseline, *candidates]
    if not importing and read_workloads and read_loads:
        runs = len(read_workloads) * len(read_loads) * len(arms) * repetitions
        if runs > settings.SPECPORTAL_MAX_RUNS_PER_PLAN:
            errors.setdefault("repetitions", []).append(
                f"the plan would hold {runs} runs ({len(read_workloads)} workloads × "
                f"{len(read_loads)} loads × {len(arms)} arms × {repetitions} repetitions); "
                f"at most {settings.SPECPORTAL_MAX_RUNS_PER_PLAN} (SPECPORTAL_MAX_RUNS_PER_PLAN)"
            )
    if len({c.pk for c in arms}) != len(arms):
        errors.setdefault("candidates", []).append("every arm must be a different configuration")
    arm_labels = (
        list(labels)
        if labels
        else ["baseline", *(c.name or f"candidate-{i}" for i, c in enumerate(candidates, 1))]
    )
    if len(arm_labels) != len(arms) or len(set(arm_labels)) != len(arm_labels):
        errors.setdefault("labels", []).append("one distinct label per arm, baseline first")
    differences: list[dict[str, Any]] = []
    for index, candidate in enumerate(candidates):
        for change in arm_differences(baseline, candidate):
            differences.append({"candidate": index, **change})
    if differences and not arms_difference_reason.strip():
        errors.setdefault("candidates", []).append(
            "arms must share engine, engine_build, target, runtime and sampling; they differ at "
            + ", ".join(sorted({d["path"] for d in differences}))
            + " (give arms_difference_reason to allow it)"
        )
    if calibrate_draft_cost:
        for message in _draft_cost_refusals(candidates, arm_labels[1:], importing=importing):
            errors.setdefault("calibrate_draft_cost", []).append(message)
    normalised: dict[str, Any] = {}
    try:
        normalised = validate_objectives(
            objectives,
            loads=[load.name for load in read_loads],
            workloads=[w.name for w in read_workloads],
        )
    except ObjectivesError as exc:
        for path, messages in exc.fields.items():
            errors.setdefault(f"objectives.{path}" if path else "objectives", []).extend(messages)
    if errors:
        raise ApplicationError("The experiment is not valid.", fields=errors)

    experiment = Experiment(
        name=name,
        description=description,
        created_by=user if isinstance(user, User) else None,
        # Stored as the protocol writes them: every key, so the run spec serves them as checked.
        workloads=[w.to_dict() for w in read_workloads],
        loads=[load.to_dict() for load in read_loads],
        repetitions=repetitions,
        warmup_requests=warmup_requests,
        cache_policy=cache_policy,
        failure_policy=failure_policy,
        max_failed_runs=max_failed_runs,
        calibrate_draft_cost=calibrate_draft_cost,
        objectives=normalised,
        arms_difference_reason=arms_difference_reason.strip() if differences else "",
        arms_differences=differences,
        mode=mode,
        context=clean_context,
    )
    experiment.full_clean()
    experiment.save()
    experiment.hosts.set(hosts)
    Arm.objects.bulk_create(
        Arm(experiment=experiment, position=i, label=label, configuration=config)
        for i, (label, config) in enumerate(zip(arm_labels, arms, strict=True))
    )
    audit.record(
        action="experiment.create",
        target=experiment,
        after={
            **audit.snapshot(experiment, fields=AUDITED_FIELDS),
            "arms": [
                {"label": label, "configuration": c.pk}
                for label, c in zip(arm_labels, arms, strict=True)
            ],
        },
        actor=experiment.created_by,
    )
    return experiment


def _draft_cost_refusals(
    candidates: Sequence[FrozenConfiguration], labels: Sequence[str], *, importing: bool
) -> list[str]:
    """Why ``calibrate_draft_cost`` cannot be honoured: a candidate without a standalone draft
    model (an EAGLE head or MTP layer runs on the target's hidden states; n-gram has no model),
    or an imported experiment (nothing here measures its runs)."""
    from analysis.speculation import DraftCostRefused, draft_alone_configuration

    if importing:
        return ["an imported experiment measures nothing: no run can serve a draft alone"]
    refusals = []
    for label, candidate in zip(labels, candidates, strict=False):
        try:
            draft_alone_configuration(candidate.document)
        except DraftCostRefused as exc:
            refusals.append(f"{label}: {exc}")
    return refusals


def _draft_alone_runs(experiment: Experiment, planned: Sequence[Run]) -> list[Run]:
    """The calibrate_draft_cost runs: per cell and candidate, the candidate's draft model served
    alone as the target with the cell's workload and concurrency, on the cell's host, after
    every planned run (repetition 0: it is no repetition of the arm)."""
    from analysis.speculation import draft_alone_configuration
    from configurations.services import configuration_create

    host_of = {(r.workload, r.load): r.host for r in planned}
    estimate = {(r.workload, r.load): r.estimated_seconds for r in planned}
    sequence = max((r.sequence for r in planned), default=0)
    runs = []
    for arm in experiment.arms.select_related("configuration").order_by("position")[1:]:
        alone, _ = configuration_create(
            document=draft_alone_configuration(arm.configuration.document),
            name=f"{arm.configuration.name or arm.label} — draft alone"[:200],
            description=f"The draft model of {arm.configuration.name or arm.label} served alone "
            "as the target, to measure its cost (calibrate_draft_cost).",
        )
        for workload, load in host_of:
            sequence += 1
            runs.append(
                Run(
                    experiment=experiment,
                    arm=arm,
                    host=host_of[(workload, load)],
                    sequence=sequence,
                    workload=workload,
                    load=load,
                    repetition=0,
                    position=1,
                    estimated_seconds=estimate[(workload, load)],
                    draft_alone_configuration=alone,
                )
            )
    return runs


def _require_draft(experiment: Experiment) -> None:
    if experiment.locked_at is not None or experiment.status != Experiment.Status.DRAFT:
        raise ApplicationError(
            "The experiment has started; its plan and objectives are locked.",
            code="locked",
            status_code=409,
        )


@transaction.atomic
def experiment_plan(*, experiment: Experiment) -> list[Run]:
    """(Re)build the run list in execution order; only before start."""
    experiment = Experiment.objects.select_for_update().get(pk=experiment.pk)
    _require_draft(experiment)
    arms = list(experiment.arms.order_by("position"))
    hosts = sorted(experiment.hosts.all(), key=lambda h: h.name)
    by_label = {arm.label: arm for arm in arms}
    host_by_name = {host.name: host for host in hosts}
    planned = plan_runs(
        arms=[arm.label for arm in arms],
        workloads={w["name"]: w for w in experiment.workloads},
        loads={load["name"]: load for load in experiment.loads},
        repetitions=experiment.repetitions,
        hosts=[host.name for host in hosts],
        fresh_server=experiment.cache_policy == Experiment.CachePolicy.FRESH_SERVER,
    )
    experiment.runs.all().delete()
    runs = [
        Run(
            experiment=experiment,
            arm=by_label[p.arm],
            host=host_by_name[p.host],
            sequence=p.sequence,
            workload=p.cell.workload,
            load=p.cell.load,
            repetition=p.repetition,
            position=p.position,
            estimated_seconds=p.estimated_seconds,
        )
        for p in planned
    ]
    if experiment.calibrate_draft_cost:
        runs += _draft_alone_runs(experiment, runs)
    audit.record(
        action="experiment.plan",
        target=experiment,
        after={"runs": len(runs), "hosts": [h.name for h in hosts]},
    )
    return Run.objects.bulk_create(runs)


def _start_refusals(
    experiment: Experiment, *, lint_override_reason: str
) -> tuple[dict[str, list[str]], list[dict[str, Any]]]:
    """Host capability and lint problems: (refusals by path, findings to keep)."""
    from experiments.checks import endpoint_refusals, host_refusals, lint_findings

    refusals: dict[str, list[str]] = {}
    findings: list[dict[str, Any]] = []
    arms = list(experiment.arms.select_related("configuration").order_by("position"))
    hosts = list(experiment.hosts.all())
    with_cells = _hosts_with_cells(experiment, hosts)
    for host in hosts:
        if host.name in with_cells:
            for message in endpoint_refusals(host, [(a.label, a.configuration) for a in arms]):
                refusals.setdefault(f"hosts.{host.name}", []).append(message)
        for arm in arms:
            for message in host_refusals(host, arm.configuration):
                refusals.setdefault(f"hosts.{host.name}", []).append(f"{arm.label}: {message}")
            for finding in lint_findings(arm.configuration, host):
                findings.append({"arm": arm.label, "host": host.name, **finding})
    for path, message in _run_time_refusals(experiment):
        refusals.setdefault(path, []).append(message)
    errors = [f for f in findings if f.get("severity") == "error"]
    if errors and not lint_override_reason.strip():
        for finding in errors:
            refusals.setdefault(f"arms.{finding['arm']}", []).append(
                f"lint error {finding.get('rule', '')}: {finding.get('message', '')} "
                "(give lint_override_reason to start anyway)"
            )
    return refusals, findings


def _hosts_with_cells(experiment: Experiment, hosts: Sequence[GpuHost]) -> set[str]:
    """Names of the hosts the plan gives at least one cell (the plan as it stands, or would be)."""
    planned = set(experiment.runs.values_list("host__name", flat=True))
    if planned:
        return planned
    cells = cells_of(
        [str(w["name"]) for w in experiment.workloads],
        [str(load["name"]) for load in experiment.loads],
    )
    if not cells or not hosts:
        return set()
    return set(assign_hosts(cells, sorted(h.name for h in hosts)).values())


def _run_time_refusals(experiment: Experiment) -> Iterator[tuple[str, str]]:
    """Cells whose runs would outlast the broker's visibility timeout (Redis would redeliver).

    The embedded filesystem broker has no visibility timeout: nothing to check there.
    """
    limit = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout")
    if not isinstance(limit, int | float):
        return
    fresh = experiment.cache_policy == Experiment.CachePolicy.FRESH_SERVER
    for workload in experiment.workloads:
        for load in experiment.loads:
            seconds = estimate_run_seconds(workload, load, fresh_server=fresh)
            if seconds >= limit:
                yield (
                    f"loads.{load['name']}",
                    f"{workload['name']}/{load['name']}: a run is estimated at {seconds:.0f} s, "
                    f"not under the broker's visibility timeout of {limit} s; shorten the load "
                    "level or raise CELERY_VISIBILITY_TIMEOUT on the portal and the agents",
                )


@transaction.atomic
def experiment_start(*, experiment: Experiment, lint_override_reason: str = "") -> Experiment:
    """Check hosts and lint, lock the objectives (hash + timestamp), queue each host's first run."""
    experiment = Experiment.objects.select_for_update().get(pk=experiment.pk)
    _require_draft(experiment)
    measured = experiment.mode == Experiment.Mode.MEASURED
    refusals: dict[str, list[str]] = {}
    findings: list[dict[str, Any]] = []
    if measured:  # an import-mode experiment runs nothing: no host to check, no plan to queue
        refusals, findings = _start_refusals(experiment, lint_override_reason=lint_override_reason)
    if refusals:
        raise ApplicationError(
            "The experiment cannot start.", code="refused", fields=refusals, status_code=409
        )
    if measured and not experiment.runs.exists():
        experiment_plan(experiment=experiment)
    now = timezone.now()
    before = audit.snapshot(experiment, fields=AUDITED_FIELDS)
    experiment.objectives_hash = objectives_hash(experiment.objectives)
    experiment.locked_at = now
    experiment.started_at = now
    experiment.status = Experiment.Status.RUNNING
    experiment.lint_findings = findings
    experiment.lint_override_reason = lint_override_reason.strip()
    experiment.save(
        update_fields=[
            "objectives_hash",
            "locked_at",
            "started_at",
            "status",
            "lint_findings",
            "lint_override_reason",
        ]
    )
    audit.record(
        action="experiment.start",
        target=experiment,
        before=before,
        after=audit.snapshot(experiment, fields=AUDITED_FIELDS),
    )
    # The objectives' lock is its own event: what the verdicts (and approvals) will cite.
    audit.record(
        action="objectives.lock",
        target=experiment,
        after={
            "objectives_hash": experiment.objectives_hash,
            "locked_at": now.isoformat(),
            "objectives": experiment.objectives,
        },
    )
    if measured:
        experiment_advance(experiment_id=experiment.pk)
    return experiment


@transaction.atomic
def experiment_advance(*, experiment_id: int) -> None:
    """Queue the next planned run of every host that has nothing in flight; finish when done.

    Called after start and whenever a run of the experiment ends. Applies the failure policy.
    """
    experiment = Experiment.objects.select_for_update().get(pk=experiment_id)
    if experiment.status != Experiment.Status.RUNNING:
        return
    runs = experiment.runs
    failed = runs.filter(status__in=[Run.Status.FAILED, Run.Status.INCOMPLETE]).count()
    if (
        experiment.failure_policy == Experiment.FailurePolicy.STOP
        and failed > experiment.max_failed_runs
    ):
        runs.filter(status=Run.Status.PLANNED).update(
            status=Run.Status.CANCELLED,
            finished_at=timezone.now(),
            error="not run: the failure policy stopped the experiment",
        )
        experiment.status = Experiment.Status.STOPPED
    busy_hosts = set(runs.filter(status__in=ACTIVE_STATES).values_list("host_id", flat=True))
    if experiment.status == Experiment.Status.RUNNING:
        for host_id in set(runs.values_list("host_id", flat=True)) - busy_hosts:
            nxt = (
                runs.filter(host_id=host_id, status=Run.Status.PLANNED).order_by("sequence").first()
            )
            if nxt is not None:
                run_queue(nxt)
                busy_hosts.add(host_id)
    if not busy_hosts and not runs.filter(status=Run.Status.PLANNED).exists():
        if experiment.status == Experiment.Status.RUNNING:
            experiment.status = Experiment.Status.DONE
        announce = experiment.finished_at is None
        experiment.finished_at = experiment.finished_at or timezone.now()
        if announce:
            _announce_finished(experiment)
    experiment.save(update_fields=["status", "finished_at"])


def _announce_finished(experiment: Experiment) -> None:
    import notifications

    notifications.emit(
        "experiment.finished",
        {"experiment": experiment.pk, "name": experiment.name, "status": experiment.status},
    )


@transaction.atomic
def experiment_cancel(*, experiment: Experiment) -> Experiment:
    """Runs not yet claimed are cancelled; runs in flight get the cancel flag the agent polls."""
    experiment = Experiment.objects.select_for_update().get(pk=experiment.pk)
    if experiment.status in (Experiment.Status.DONE, Experiment.Status.CANCELLED):
        return experiment
    now = timezone.now()
    before = audit.snapshot(experiment, fields=AUDITED_FIELDS)
    experiment.runs.filter(status__in=[Run.Status.PLANNED, Run.Status.QUEUED]).update(
        status=Run.Status.CANCELLED, finished_at=now, error="cancelled before it started"
    )
    experiment.runs.filter(status__in=[Run.Status.CLAIMED, Run.Status.RUNNING]).update(
        cancel_requested=True
    )
    experiment.status = Experiment.Status.CANCELLED
    experiment.finished_at = now
    experiment.save(update_fields=["status", "finished_at"])
    audit.record(
        action="experiment.cancel",
        target=experiment,
        before=before,
        after=audit.snapshot(experiment, fields=AUDITED_FIELDS),
    )
    _announce_finished(experiment)
    return experiment
