"""The evidence rules of a change request, evaluated when it opens, at approval, at apply and
whenever a newer verdict supersedes its evidence.

:func:`gather` reads what the rules need from the database into plain values; :func:`evaluate`
applies the rules to them and returns one line per rule (pass/fail, a sentence), so the page, the
API and the audit event show the same lines. The rules (issue 16):

- evidence exists; each experiment finished;
- A is the baseline (same configuration hash) and B a candidate, in the experiment and in its
  verdict;
- the experiment was judged by the deployment's required objectives (by hash), or by a stricter
  document the deployment's owner accepted — not one the change's author accepted;
- the objectives were locked before the first run started (both times shown); imported runs dated
  before the lock, or undated, count against the evidence; imported runs are shown as imported;
- nothing was measured on an emulated host, unless the deployment is a demo;
- B's verdict covers every workload × load the deployment lists (matched by content) and is KEEP
  in each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from approvals.content import load_key, workload_key
from approvals.verdict_source import verdict_of

STATE_KEEP = "KEEP"


@dataclass(frozen=True)
class RunFacts:
    id: int
    started_at: datetime | None
    emulated: bool
    imported: bool


@dataclass(frozen=True)
class ExperimentFacts:
    id: int
    name: str
    status: str
    created_by_id: int | None
    locked_at: datetime | None
    objectives_hash: str
    arms: Mapping[str, str]  # label → config hash, baseline first
    baseline_label: str
    workload_keys: Mapping[str, str]  # experiment's workload name → content key
    load_keys: Mapping[str, str]
    runs: Sequence[RunFacts]
    verdict: Mapping[str, Any] | None


@dataclass(frozen=True)
class DeploymentFacts:
    name: str
    is_demo: bool
    objectives_hash: str
    # accepted stricter documents: hash → id of the user who accepted it
    accepted: Mapping[str, int]
    cells: Sequence[tuple[str, str, str, str]]  # (workload label, workload key, load label, key)


@dataclass(frozen=True)
class Facts:
    deployment: DeploymentFacts
    from_hash: str
    to_hash: str
    author_id: int
    experiments: Sequence[ExperimentFacts]


@dataclass
class Evaluation:
    lines: list[dict[str, Any]] = field(default_factory=list)
    cells: list[dict[str, Any]] = field(default_factory=list)  # per deployment cell, for pages

    @property
    def passed(self) -> bool:
        return bool(self.lines) and all(line["passed"] for line in self.lines)

    @property
    def failed_rules(self) -> list[str]:
        return sorted({line["rule"] for line in self.lines if not line["passed"]})

    def add(self, rule: str, passed: bool, message: str, **extra: Any) -> None:
        self.lines.append({"rule": rule, "passed": passed, "message": message, **extra})

    def verdict_ids(self, facts: Facts) -> dict[str, int | None]:
        return {
            str(e.id): (e.verdict or {}).get("verdict_id") if e.verdict else None
            for e in facts.experiments
        }


def _when(moment: datetime | None) -> str:
    return "undated" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _label_of(verdict: Mapping[str, Any], config_hash: str, role: str) -> str | None:
    for arm in verdict.get("arms") or []:
        if arm.get("config_hash") == config_hash and arm.get("role") == role:
            return str(arm.get("arm"))
    return None


def evaluate(facts: Facts) -> Evaluation:
    out = Evaluation()
    dep = facts.deployment
    if not facts.experiments:
        out.add("evidence", False, "No evidence: a change request needs at least one experiment.")
        return out
    # per deployment cell: the candidate's states in every experiment that measured it
    states: dict[tuple[str, str], list[tuple[int, str, str, str | None]]] = {
        (w, lo): [] for (_, w, _, lo) in dep.cells
    }
    for exp in facts.experiments:
        ref = f"experiment #{exp.id} ({exp.name})"
        out.add(
            "finished",
            exp.status == "done",
            f"{ref} finished." if exp.status == "done" else f"{ref} is {exp.status}, not finished.",
            experiment=exp.id,
        )
        baseline_hash = exp.arms.get(exp.baseline_label)
        out.add(
            "baseline_is_a",
            baseline_hash == facts.from_hash,
            f"{ref}: its baseline is A ({facts.from_hash[:12]})."
            if baseline_hash == facts.from_hash
            else f"{ref}: its baseline {str(baseline_hash)[:12]} is not A "
            f"({facts.from_hash[:12]}): a comparison against another configuration is not "
            "evidence for this change.",
            experiment=exp.id,
        )
        candidate_labels = [
            label
            for label, h in exp.arms.items()
            if h == facts.to_hash and label != exp.baseline_label
        ]
        out.add(
            "candidate_is_b",
            bool(candidate_labels),
            f"{ref}: B ({facts.to_hash[:12]}) is its candidate {candidate_labels[0]!r}."
            if candidate_labels
            else f"{ref}: B ({facts.to_hash[:12]}) is not one of its candidates.",
            experiment=exp.id,
        )
        # objectives: the deployment's, or a stricter document its owner accepted
        if exp.objectives_hash and exp.objectives_hash == dep.objectives_hash:
            out.add(
                "objectives",
                True,
                f"{ref} was judged by {dep.name}'s required objectives "
                f"({dep.objectives_hash[:12]}).",
                experiment=exp.id,
            )
        elif exp.objectives_hash in dep.accepted:
            by_author = dep.accepted[exp.objectives_hash] == facts.author_id
            out.add(
                "objectives",
                not by_author,
                f"{ref} was judged by objectives {exp.objectives_hash[:12]}, accepted as stricter "
                f"by {dep.name}'s owner"
                + (
                    " — but accepted by this change's author, who may not set the rules their "
                    "own evidence is judged by."
                    if by_author
                    else "."
                ),
                experiment=exp.id,
            )
        else:
            out.add(
                "objectives",
                False,
                f"{ref} was judged by objectives {exp.objectives_hash[:12] or '(not locked)'}, "
                f"neither {dep.name}'s required {dep.objectives_hash[:12]} nor a stricter "
                "document its owner accepted.",
                experiment=exp.id,
            )
        # the lock precedes the first run (both shown); imported runs dated after the lock
        measured = [r for r in exp.runs if not r.imported and r.started_at is not None]
        first = min((r.started_at for r in measured if r.started_at), default=None)
        lock_ok = exp.locked_at is not None and (first is None or exp.locked_at < first)
        out.add(
            "lock_before_first_run",
            lock_ok and first is not None,
            f"{ref}: objectives locked {_when(exp.locked_at)}, first run started {_when(first)}"
            + (
                "."
                if lock_ok and first is not None
                else (
                    ": no run was measured."
                    if first is None
                    else ": the lock does not precede the first run."
                )
            ),
            experiment=exp.id,
            locked_at=exp.locked_at.isoformat() if exp.locked_at else None,
            first_run_started_at=first.isoformat() if first else None,
        )
        imported = [r for r in exp.runs if r.imported]
        verdict_imported = bool(exp.verdict and exp.verdict.get("imported"))
        if imported or verdict_imported:
            bad = [
                r
                for r in imported
                if r.started_at is None or exp.locked_at is None or r.started_at <= exp.locked_at
            ]
            unmarked = verdict_imported and not imported
            out.add(
                "imported_runs",
                not bad and not unmarked,
                f"{ref}: {len(imported)} imported run(s), not measured by SpecPortal"
                + (
                    f"; {len(bad)} dated before the lock or undated (runs "
                    + ", ".join(f"#{r.id}" for r in bad[:10])
                    + "): they count against the evidence."
                    if bad
                    else (
                        "; the verdict counts imported runs the portal cannot date: they count "
                        "against the evidence."
                        if unmarked
                        else ", all dated after the lock."
                    )
                ),
                experiment=exp.id,
                imported=True,
            )
        emulated = any(r.emulated for r in exp.runs) or bool(
            exp.verdict and exp.verdict.get("emulated")
        )
        if emulated:
            out.add(
                "not_emulated",
                dep.is_demo,
                f"{ref} was measured on emulated hosts"
                + (
                    f": allowed because {dep.name} is a demo deployment (demonstrates SpecPortal, "
                    "not evidence)."
                    if dep.is_demo
                    else ": emulated figures are not evidence."
                ),
                experiment=exp.id,
                emulated=True,
            )
        else:
            out.add("not_emulated", True, f"{ref}: measured on real hosts.", experiment=exp.id)
        verdict = exp.verdict
        if verdict is None:
            out.add(
                "verdict",
                False,
                f"{ref}: verdict pending (none stored yet).",
                experiment=exp.id,
            )
            continue
        baseline_in_verdict = _label_of(verdict, facts.from_hash, "baseline")
        candidate_in_verdict = _label_of(verdict, facts.to_hash, "candidate")
        verdict_ok = (
            baseline_in_verdict is not None
            and candidate_in_verdict is not None
            and verdict.get("objectives_sha256") == exp.objectives_hash
        )
        out.add(
            "verdict",
            verdict_ok,
            f"{ref}: verdict #{verdict.get('verdict_id')} ({verdict.get('analysis_version')}) "
            + (
                f"judges B as {candidate_in_verdict!r} against A as {baseline_in_verdict!r}."
                if verdict_ok
                else "does not judge B against A under the experiment's locked objectives."
            ),
            experiment=exp.id,
            verdict_id=verdict.get("verdict_id"),
        )
        if not verdict_ok:
            continue
        for cell in verdict.get("cells") or []:
            wkey = exp.workload_keys.get(str(cell.get("workload")))
            lkey = exp.load_keys.get(str(cell.get("load")))
            if (wkey, lkey) not in states:
                continue
            for candidate in cell.get("candidates") or []:
                if candidate.get("arm") == candidate_in_verdict:
                    states[(str(wkey), str(lkey))].append(
                        (
                            exp.id,
                            str(cell.get("workload")),
                            str(cell.get("load")),
                            candidate.get("state"),
                        )
                    )
                    out_cell_reasons = candidate.get("reasons") or []
                    out.cells.append(
                        {
                            "experiment": exp.id,
                            "workload": cell.get("workload"),
                            "load": cell.get("load"),
                            "state": candidate.get("state"),
                            "reasons": list(out_cell_reasons)[:5],
                            "runs_needed": candidate.get("runs_needed"),
                        }
                    )
    for wlabel, wkey, llabel, lkey in dep.cells:
        found = states[(wkey, lkey)]
        name = f"{wlabel} × {llabel}"
        if not found:
            out.add(
                "coverage",
                False,
                f"{name}: no evidence experiment measured this workload at this load "
                "(matched by content): the evidence is incomplete.",
                cell=[wlabel, llabel],
            )
            continue
        shown = "; ".join(
            f"{state or 'no verdict (out of scope)'} in experiment #{eid} ({w}/{lo})"
            for eid, w, lo, state in found
        )
        keep = all(state == STATE_KEEP for *_, state in found)
        out.add("keep", keep, f"{name}: {shown}.", cell=[wlabel, llabel])
    return out


def gather(change_request: Any) -> Facts:
    """Read what the rules need about a change request (its deployment, A, B, evidence)."""
    from approvals.models import ChangeRequest
    from runs.models import Run

    cr: ChangeRequest = change_request
    deployment = cr.deployment
    accepted = {a.objectives_hash: a.accepted_by_id for a in deployment.accepted_objectives.all()}
    cells = [
        (str(w.get("name")), workload_key(w), str(lo.get("name")), load_key(lo))
        for w in deployment.workloads
        for lo in deployment.loads
    ]
    experiments = []
    for exp in cr.evidence.all().order_by("pk"):
        arms = {
            a.label: a.configuration.config_hash
            for a in exp.arms.select_related("configuration").order_by("position")
        }
        baseline = next(iter(arms), "")
        runs = [
            RunFacts(
                id=run.pk,
                started_at=run.started_at,
                emulated=bool(run.host is not None and run.host.emulated),
                imported=_run_is_imported(run),
            )
            for run in Run.objects.filter(experiment=exp)
            .exclude(status=Run.Status.CANCELLED)
            .select_related("host")
        ]
        experiments.append(
            ExperimentFacts(
                id=exp.pk,
                name=exp.name,
                status=str(exp.status),
                created_by_id=exp.created_by_id,
                locked_at=exp.locked_at,
                objectives_hash=exp.objectives_hash,
                arms=arms,
                baseline_label=baseline,
                workload_keys=_keys(exp.workloads, workload_key),
                load_keys=_keys(exp.loads, load_key),
                runs=runs,
                verdict=verdict_of(exp.pk),
            )
        )
    return Facts(
        deployment=DeploymentFacts(
            name=deployment.name,
            is_demo=deployment.is_demo,
            objectives_hash=deployment.objectives_hash,
            accepted=accepted,
            cells=cells,
        ),
        from_hash=cr.from_configuration.config_hash,
        to_hash=cr.to_configuration.config_hash,
        author_id=cr.author_id,
        experiments=experiments,
    )


def _keys(documents: Any, key: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for document in documents or []:
        try:
            out[str(document.get("name"))] = key(document)
        except Exception:
            continue
    return out


def _run_is_imported(run: Any) -> bool:
    """A run filled from an uploaded file (import mode) rather than measured by a portal agent:
    any source format counts, SpecPortal's own result file included (nobody saw it measured)."""
    return bool(getattr(run, "source_format", "")) or bool(getattr(run, "imported", False))
