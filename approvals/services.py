"""Every write of deployments and change requests; the only code that moves a request's state.

Each transition: lock the request's row (``SELECT ... FOR UPDATE``: a second decision waits, then
finds the state changed), check who may do it *now* (roles read from the database at that moment:
a manager demoted mid-review can no longer decide), check the transition is legal (django-fsm-2;
an illegal one is a 409 naming the allowed sources), evaluate the evidence where the rules say so,
save (a conditional UPDATE on the state, as a second guard), audit, and announce on commit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.db import transaction
from django.utils import timezone
from django_fsm import ConcurrentTransition, TransitionNotAllowed

import audit
import notifications
from accounts import roles
from accounts.selectors import user_has_role
from analysis.objectives import ObjectivesError, objectives_hash, validate_objectives
from approvals.content import load_normalise, workload_normalise
from approvals.evidence import Evaluation, evaluate, gather
from approvals.models import (
    AcceptedObjectives,
    ChangeRequest,
    ChangeRequestComment,
    Deployment,
    DeploymentPeriod,
    EvidenceCheck,
)
from audit.context import Actor, acting_as
from configurations.models import FrozenConfiguration
from experiments.models import Experiment
from specportal.api.errors import ApplicationError
from specportal.protocol import ProtocolError

State = ChangeRequest.State
DEPLOYMENT_FIELDS = (
    "name",
    "owner_team",
    "description",
    "configuration",
    "workloads",
    "loads",
    "objectives",
    "objectives_hash",
    "is_demo",
    "self_approval_reason",
    "approval_valid_days",
)
REQUEST_FIELDS = (
    "deployment",
    "from_configuration",
    "to_configuration",
    "reason",
    "evidence",
    "state",
    "author",
    "opened_at",
    "decided_by",
    "decided_at",
    "decision_note",
    "against_evidence",
    "self_approval_reason",
    "expires_at",
    "applied_by",
    "applied_at",
    "closed_at",
    "closed_reason",
)
# Which transitions exist from where (the FSM's own table, for messages).
SOURCES: Mapping[str, tuple[str, ...]] = {
    "open": (State.DRAFT,),
    "withdraw": (State.DRAFT, State.OPEN),
    "approve": (State.OPEN,),
    "reject": (State.OPEN,),
    "apply": (State.APPROVED,),
    "expire": (State.APPROVED,),
    "reopen": (State.APPROVED,),
}


# --- helpers ----------------------------------------------------------------------------------


def _user(user: AbstractBaseUser | AnonymousUser | None) -> User:
    """The acting user as the database has them now (roles and superuser flag included)."""
    if not isinstance(user, User) or not user.is_authenticated:
        raise ApplicationError("Log in first.", code="not_authenticated", status_code=401)
    return User.objects.get(pk=user.pk)


def _denied(message: str, code: str = "permission_denied") -> ApplicationError:
    return ApplicationError(message, code=code, status_code=403)


def _snapshot_request(cr: ChangeRequest) -> dict[str, Any]:
    return audit.snapshot(cr, fields=REQUEST_FIELDS)


def _snapshot_deployment(deployment: Deployment) -> dict[str, Any]:
    return audit.snapshot(deployment, fields=DEPLOYMENT_FIELDS)


def _locked(cr: ChangeRequest) -> ChangeRequest:
    locked: ChangeRequest = (
        ChangeRequest.objects.select_for_update()
        .select_related("deployment", "from_configuration", "to_configuration")
        .get(pk=cr.pk)
    )
    return locked


def _transition(cr: ChangeRequest, name: str) -> None:
    try:
        getattr(cr, name)()
    except TransitionNotAllowed as exc:
        allowed = ", ".join(SOURCES[name])
        raise ApplicationError(
            f"Change request #{cr.pk} is {cr.state}: it cannot {name} (only from {allowed}).",
            code="illegal_transition",
            status_code=409,
        ) from exc


def _save(cr: ChangeRequest) -> None:
    try:
        cr.save()
    except ConcurrentTransition as exc:
        raise ApplicationError(
            f"Change request #{cr.pk} was changed by someone else meanwhile; reload it.",
            code="concurrent_transition",
            status_code=409,
        ) from exc


def _announce(event: str, cr: ChangeRequest, **extra: Any) -> None:
    """Through ``notifications.emit`` in this transaction (a rolled-back change announces
    nothing)."""
    payload = {
        "change_request": cr.pk,
        "deployment": cr.deployment.name,
        "from_config_hash": cr.from_configuration.config_hash,
        "to_config_hash": cr.to_configuration.config_hash,
        "state": str(cr.state),
        "against_evidence": cr.against_evidence,
        "url_path": f"/change-requests/{cr.pk}/",
        **extra,
    }
    notifications.emit(event, payload)


def _check(
    cr: ChangeRequest, stage: str, actor: User | None = None
) -> tuple[EvidenceCheck, Evaluation]:
    facts = gather(cr)
    evaluation = evaluate(facts)
    check = EvidenceCheck.objects.create(
        change_request=cr,
        stage=stage,
        passed=evaluation.passed,
        rules={"lines": evaluation.lines, "cells": evaluation.cells},
        verdict_ids=evaluation.verdict_ids(facts),
    )
    audit.record(
        actor=actor,
        action="change_request.evidence_check",
        target=cr,
        after={
            "stage": stage,
            "passed": evaluation.passed,
            "failed_rules": evaluation.failed_rules,
            "verdict_ids": check.verdict_ids,
        },
    )
    return check, evaluation


def _involved(cr: ChangeRequest) -> dict[int, str]:
    """Who may not approve (four eyes), and why: the author, the evidence's creators, and whoever
    first stored the candidate configuration."""
    out: dict[int, str] = {cr.author_id: "the author of this change request"}
    for exp in cr.evidence.all():
        if exp.created_by_id is not None:
            out.setdefault(exp.created_by_id, f"the creator of evidence experiment #{exp.pk}")
    if cr.to_configuration.created_by_id is not None:
        out.setdefault(
            cr.to_configuration.created_by_id, "who first stored the candidate configuration"
        )
    return out


# --- deployments ------------------------------------------------------------------------------


def _documents(
    workloads: Any, loads: Any, objectives: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    errors: dict[str, list[str]] = {}
    out: dict[str, list[dict[str, Any]]] = {"workloads": [], "loads": []}
    for section, items, normalise in (
        ("workloads", workloads, workload_normalise),
        ("loads", loads, load_normalise),
    ):
        if not isinstance(items, list) or not items:
            errors.setdefault(section, []).append("must be a non-empty list")
            continue
        names: set[str] = set()
        for index, item in enumerate(items):
            try:
                document = normalise(item, path=f"{section}.{index}")
            except ProtocolError as exc:
                for path, messages in exc.fields.items():
                    errors.setdefault(path or f"{section}.{index}", []).extend(messages)
                continue
            if document["name"] in names:
                errors.setdefault(f"{section}.{index}.name", []).append("used twice")
            names.add(document["name"])
            out[section].append(document)
    normalised: dict[str, Any] = {}
    try:
        normalised = validate_objectives(
            objectives,
            loads=[str(x.get("name")) for x in out["loads"]],
            workloads=[str(x.get("name")) for x in out["workloads"]],
        )
    except ObjectivesError as exc:
        for path, messages in exc.fields.items():
            errors.setdefault(f"objectives.{path}" if path else "objectives", []).extend(messages)
    if errors:
        raise ApplicationError("The deployment is not valid.", fields=errors)
    return out["workloads"], out["loads"], normalised


def _require_manager(user: User, what: str) -> None:
    if not user_has_role(user, roles.MANAGER):
        raise _denied(f"Only managers {what}.")


@transaction.atomic
def deployment_create(
    *,
    user: AbstractBaseUser | AnonymousUser | None,
    name: str,
    owner_team: str,
    configuration: FrozenConfiguration,
    workloads: list[dict[str, Any]],
    loads: list[dict[str, Any]],
    objectives: Mapping[str, Any],
    description: str = "",
    is_demo: bool = False,
    self_approval_reason: str = "",
    approval_valid_days: int = 14,
) -> Deployment:
    """Register a deployment with the configuration it runs now (its history's first period)."""
    actor = _user(user)
    _require_manager(actor, "register deployments")
    if Deployment.objects.filter(name=name).exists():
        raise ApplicationError(
            f"A deployment named {name!r} exists.", fields={"name": ["already used"]}
        )
    normal_workloads, normal_loads, normal_objectives = _documents(workloads, loads, objectives)
    deployment = Deployment.objects.create(
        name=name,
        owner_team=owner_team,
        description=description,
        configuration=configuration,
        workloads=normal_workloads,
        loads=normal_loads,
        objectives=normal_objectives,
        objectives_hash=objectives_hash(normal_objectives),
        is_demo=is_demo,
        self_approval_reason=self_approval_reason.strip(),
        approval_valid_days=approval_valid_days,
        created_by=actor,
    )
    DeploymentPeriod.objects.create(
        deployment=deployment, configuration=configuration, started_at=timezone.now()
    )
    audit.record(
        actor=actor,
        action="deployment.create",
        target=deployment,
        after=_snapshot_deployment(deployment),
    )
    return deployment


@transaction.atomic
def deployment_update(
    *,
    user: AbstractBaseUser | AnonymousUser | None,
    deployment: Deployment,
    owner_team: str | None = None,
    description: str | None = None,
    self_approval_reason: str | None = None,
    approval_valid_days: int | None = None,
) -> Deployment:
    """Change what is not evidence-relevant; the configuration moves only by applied changes,
    and the required objectives, workloads and loads are fixed (a stricter document is accepted
    with :func:`deployment_objectives_accept`)."""
    actor = _user(user)
    _require_manager(actor, "edit deployments")
    deployment = Deployment.objects.select_for_update().get(pk=deployment.pk)
    before = _snapshot_deployment(deployment)
    if owner_team is not None:
        deployment.owner_team = owner_team
    if description is not None:
        deployment.description = description
    if self_approval_reason is not None:
        deployment.self_approval_reason = self_approval_reason.strip()
    if approval_valid_days is not None:
        deployment.approval_valid_days = approval_valid_days
    deployment.save()
    audit.record(
        actor=actor,
        action="deployment.update",
        target=deployment,
        before=before,
        after=_snapshot_deployment(deployment),
    )
    return deployment


@transaction.atomic
def deployment_objectives_accept(
    *,
    user: AbstractBaseUser | AnonymousUser | None,
    deployment: Deployment,
    objectives: Mapping[str, Any],
    reason: str,
) -> AcceptedObjectives:
    """The owner accepts a document as stricter than the required one (a manager, with a reason)."""
    actor = _user(user)
    _require_manager(actor, "accept objectives for a deployment")
    if not reason.strip():
        raise ApplicationError(
            "Say why this document is stricter.", fields={"reason": ["required"]}
        )
    _, _, normalised = _documents(deployment.workloads, deployment.loads, objectives)
    digest = objectives_hash(normalised)
    if digest == deployment.objectives_hash:
        raise ApplicationError(
            "This is the deployment's required document already.",
            fields={"objectives": ["same as required"]},
        )
    accepted, created = AcceptedObjectives.objects.get_or_create(
        deployment=deployment,
        objectives_hash=digest,
        defaults={"objectives": normalised, "reason": reason.strip(), "accepted_by": actor},
    )
    if created:
        audit.record(
            actor=actor,
            action="deployment.objectives_accept",
            target=deployment,
            after={"objectives_hash": digest, "reason": accepted.reason},
        )
    return accepted


# --- change requests --------------------------------------------------------------------------


@transaction.atomic
def change_request_create(
    *,
    user: AbstractBaseUser | AnonymousUser | None,
    deployment: Deployment,
    to_configuration: FrozenConfiguration,
    reason: str,
    evidence: Sequence[Experiment],
    open_now: bool = False,
) -> ChangeRequest:
    """A draft "deployment moves from its current configuration A to B" (opened at once with
    ``open_now``, as CI does)."""
    actor = _user(user)
    if not (user_has_role(actor, roles.EXPERIMENTER) or user_has_role(actor, roles.MANAGER)):
        raise _denied("Only experimenters and managers propose changes.")
    errors: dict[str, list[str]] = {}
    if not reason.strip():
        errors["reason"] = ["say why the deployment should change"]
    if to_configuration.pk == deployment.configuration_id:
        errors["to_configuration"] = [f"{deployment.name} runs this configuration already"]
    if len({e.pk for e in evidence}) != len(evidence):
        errors["evidence"] = ["an experiment is listed twice"]
    if errors:
        raise ApplicationError("The change request is not valid.", fields=errors)
    cr: ChangeRequest = ChangeRequest.objects.create(
        deployment=deployment,
        from_configuration=deployment.configuration,
        to_configuration=to_configuration,
        reason=reason.strip(),
        author=actor,
    )
    cr.evidence.set(evidence)
    audit.record(
        actor=actor, action="change_request.create", target=cr, after=_snapshot_request(cr)
    )
    if open_now:
        _open(cr, actor)
    fresh: ChangeRequest = ChangeRequest.objects.get(pk=cr.pk)
    return fresh


def _open(cr: ChangeRequest, actor: User) -> None:
    cr = _locked(cr)
    if cr.author_id != actor.pk:
        raise _denied("Only the author opens their change request.")
    if not cr.evidence.exists():
        raise ApplicationError(
            "A change request opens with evidence: at least one experiment in which A is the "
            "baseline and B a candidate.",
            code="missing_evidence",
            fields={"evidence": ["required"]},
            status_code=409,
        )
    before = _snapshot_request(cr)
    _transition(cr, "open")
    cr.opened_at = timezone.now()
    _save(cr)
    _check(cr, EvidenceCheck.Stage.OPEN, actor)
    audit.record(
        actor=actor,
        action="change_request.open",
        target=cr,
        before=before,
        after=_snapshot_request(cr),
    )
    _announce("change_request.opened", cr)


@transaction.atomic
def change_request_open(
    *, user: AbstractBaseUser | AnonymousUser | None, change_request: ChangeRequest
) -> ChangeRequest:
    _open(change_request, _user(user))
    opened: ChangeRequest = ChangeRequest.objects.get(pk=change_request.pk)
    return opened


@transaction.atomic
def change_request_withdraw(
    *,
    user: AbstractBaseUser | AnonymousUser | None,
    change_request: ChangeRequest,
    note: str = "",
) -> ChangeRequest:
    actor = _user(user)
    cr = _locked(change_request)
    if cr.author_id != actor.pk:
        raise _denied("Only the author withdraws a change request (managers reject).")
    before = _snapshot_request(cr)
    _transition(cr, "withdraw")
    cr.closed_at = timezone.now()
    cr.closed_reason = note.strip() or "withdrawn by its author"
    _save(cr)
    audit.record(
        actor=actor,
        action="change_request.withdraw",
        target=cr,
        before=before,
        after=_snapshot_request(cr),
    )
    _announce("change_request.withdrawn", cr)
    return cr


def approval_refusals(cr: ChangeRequest, user: User) -> list[str]:
    """Why ``user`` may not decide ``cr`` now (empty: they may). Four eyes and roles only."""
    reasons: list[str] = []
    if not user_has_role(user, roles.MANAGER):
        reasons.append("only managers decide change requests")
        return reasons
    involved = _involved(cr).get(user.pk)
    if involved and not cr.deployment.allows_self_approval:
        reasons.append(
            f"four eyes: {user.get_username()} is {involved}; someone not involved must decide"
        )
    return reasons


@transaction.atomic
def change_request_approve(
    *,
    user: AbstractBaseUser | AnonymousUser | None,
    change_request: ChangeRequest,
    justification: str = "",
) -> ChangeRequest:
    """Approve: a manager not involved in the change; the evidence is checked again now, and a
    request whose evidence fails needs a written justification (then it is approved *against the
    evidence*, and says so everywhere)."""
    actor = _user(user)
    cr = _locked(change_request)
    # state first: deciding a decided request is a 409 whoever asks
    if cr.state != State.OPEN:
        _transition(cr, "approve")
    if not user_has_role(actor, roles.MANAGER):
        raise _denied("Only managers decide change requests.")
    involved = _involved(cr).get(actor.pk)
    self_approval = ""
    if involved:
        if not cr.deployment.allows_self_approval:
            raise _denied(
                f"Four eyes: you are {involved}. Someone not involved in this change must "
                "approve it.",
                code="four_eyes",
            )
        self_approval = f"{involved}; allowed: {cr.deployment.self_approval_reason}"
    if cr.from_configuration_id != cr.deployment.configuration_id:
        raise ApplicationError(
            f"{cr.deployment.name} no longer runs A (it moved on since this request was made): "
            "the change is stale; reject or withdraw it.",
            code="stale",
            status_code=409,
        )
    _, evaluation = _check(cr, EvidenceCheck.Stage.APPROVAL, actor)
    against = not evaluation.passed
    if against and not justification.strip():
        raise ApplicationError(
            "The evidence does not support this change ("
            + ", ".join(evaluation.failed_rules)
            + "): approving it needs a written justification, and it will be marked "
            "'approved against the evidence'.",
            code="evidence_insufficient",
            fields={"justification": ["required when the evidence rules fail"]},
            status_code=409,
        )
    before = _snapshot_request(cr)
    _transition(cr, "approve")
    now = timezone.now()
    cr.decided_by = actor
    cr.decided_at = now
    cr.decision_note = justification.strip()
    cr.against_evidence = against
    cr.self_approval_reason = self_approval
    cr.expires_at = now + timedelta(days=cr.deployment.approval_valid_days)
    _save(cr)
    audit.record(
        actor=actor,
        action="change_request.approve",
        target=cr,
        before=before,
        after=_snapshot_request(cr),
    )
    _announce("change_request.decided", cr, decision="approved")
    return cr


@transaction.atomic
def change_request_reject(
    *,
    user: AbstractBaseUser | AnonymousUser | None,
    change_request: ChangeRequest,
    note: str,
) -> ChangeRequest:
    actor = _user(user)
    cr = _locked(change_request)
    if cr.state != State.OPEN:
        _transition(cr, "reject")
    if not user_has_role(actor, roles.MANAGER):
        raise _denied("Only managers decide change requests.")
    if cr.author_id == actor.pk:
        raise _denied("The author withdraws their own request rather than rejecting it.")
    if not note.strip():
        raise ApplicationError("Say why it is rejected.", fields={"note": ["required"]})
    before = _snapshot_request(cr)
    _transition(cr, "reject")
    now = timezone.now()
    cr.decided_by = actor
    cr.decided_at = now
    cr.decision_note = note.strip()
    cr.closed_at = now
    cr.closed_reason = "rejected"
    _save(cr)
    audit.record(
        actor=actor,
        action="change_request.reject",
        target=cr,
        before=before,
        after=_snapshot_request(cr),
    )
    _announce("change_request.decided", cr, decision="rejected")
    return cr


def change_request_apply(
    *, user: AbstractBaseUser | AnonymousUser | None, change_request: ChangeRequest
) -> ChangeRequest:
    """Operators (or managers) record that B now serves: the deployment's configuration changes,
    its history gets a new period, and other approved changes from A expire (superseded).

    The evidence is checked first, in its own transaction: if a newer verdict superseded it and
    the rules now fail, the request is open again (committed) and the apply is refused."""
    if change_request_recheck(change_request=change_request, stage=EvidenceCheck.Stage.APPLY):
        raise ApplicationError(
            "A newer verdict superseded this request's evidence and the rules now fail: the "
            "request is open again for a new decision.",
            code="evidence_superseded",
            status_code=409,
        )
    return _apply(user=user, change_request=change_request)


@transaction.atomic
def _apply(
    *, user: AbstractBaseUser | AnonymousUser | None, change_request: ChangeRequest
) -> ChangeRequest:
    actor = _user(user)
    cr = _locked(change_request)
    if cr.state != State.APPROVED:
        _transition(cr, "apply")
    if not (user_has_role(actor, roles.OPERATOR) or user_has_role(actor, roles.MANAGER)):
        raise _denied("Only operators and managers record that a change was applied.")
    deployment = Deployment.objects.select_for_update().get(pk=cr.deployment_id)
    if deployment.configuration_id != cr.from_configuration_id:
        raise ApplicationError(
            f"{deployment.name} no longer runs A: this approved change is stale.",
            code="stale",
            status_code=409,
        )
    before = _snapshot_request(cr)
    before_deployment = _snapshot_deployment(deployment)
    _transition(cr, "apply")
    now = timezone.now()
    cr.applied_by = actor
    cr.applied_at = now
    cr.closed_at = now
    cr.closed_reason = "applied"
    _save(cr)
    last_check = cr.checks.filter(stage=EvidenceCheck.Stage.APPROVAL).first()
    DeploymentPeriod.objects.filter(deployment=deployment, ended_at__isnull=True).update(
        ended_at=now
    )
    DeploymentPeriod.objects.create(
        deployment=deployment,
        configuration=cr.to_configuration,
        started_at=now,
        change_request=cr,
        approved_by=cr.decided_by,
        applied_by=actor,
        against_evidence=cr.against_evidence,
        evidence={
            "experiments": sorted(cr.evidence.values_list("pk", flat=True)),
            "verdict_ids": last_check.verdict_ids if last_check else {},
            "passed": last_check.passed if last_check else None,
            "justification": cr.decision_note,
            "self_approval_reason": cr.self_approval_reason,
        },
    )
    deployment.configuration = cr.to_configuration
    deployment.save(update_fields=["configuration"])
    audit.record(
        actor=actor,
        action="deployment.configuration_change",
        target=deployment,
        before=before_deployment,
        after=_snapshot_deployment(deployment),
    )
    audit.record(
        actor=actor,
        action="change_request.apply",
        target=cr,
        before=before,
        after=_snapshot_request(cr),
    )
    _announce("change_request.applied", cr)
    for other in ChangeRequest.objects.filter(deployment=deployment, state=State.APPROVED).exclude(
        pk=cr.pk
    ):
        _expire(
            other, actor, f"superseded by change request #{cr.pk}, applied {now:%Y-%m-%d %H:%M} UTC"
        )
    return cr


def _expire(change_request: ChangeRequest, actor: User | None, why: str) -> None:
    cr = _locked(change_request)
    before = _snapshot_request(cr)
    _transition(cr, "expire")
    cr.closed_at = timezone.now()
    cr.closed_reason = why
    _save(cr)
    audit.record(
        actor=actor,
        action="change_request.expire",
        target=cr,
        before=before,
        after=_snapshot_request(cr),
    )
    _announce("change_request.expired", cr)


@transaction.atomic
def change_requests_expire_due(*, now: datetime | None = None) -> list[int]:
    """Approved changes not applied in time expire (the beat task)."""
    moment = now or timezone.now()
    expired = []
    with acting_as(Actor.system("approvals.change_requests_expire_task")):
        for cr in ChangeRequest.objects.filter(state=State.APPROVED, expires_at__lt=moment):
            _expire(cr, None, f"not applied within {cr.deployment.approval_valid_days} days")
            expired.append(cr.pk)
    return expired


@transaction.atomic
def change_request_recheck(
    *, change_request: ChangeRequest, stage: str = EvidenceCheck.Stage.RECHECK
) -> bool:
    """Evaluate the evidence again when a newer verdict supersedes it (True: the request was
    re-opened). An approved request whose rules now fail, approved on the evidence rather than
    against it, goes back to open; its earlier decision stays in the audit trail."""
    cr = _locked(change_request)
    if cr.state not in (State.OPEN, State.APPROVED):
        return False
    last = cr.checks.first()
    facts = gather(cr)
    current = evaluate(facts).verdict_ids(facts)
    if last is not None and last.verdict_ids == current:
        return False  # nothing superseded the evidence since it was last judged
    with acting_as(Actor.system("approvals: evidence superseded")):
        _, evaluation = _check(cr, stage)
        if cr.state == State.APPROVED and not evaluation.passed and not cr.against_evidence:
            before = _snapshot_request(cr)
            _transition(cr, "reopen")
            cr.decided_by = None
            cr.decided_at = None
            cr.decision_note = ""
            cr.expires_at = None
            cr.self_approval_reason = ""
            _save(cr)
            audit.record(
                action="change_request.reopen",
                target=cr,
                before=before,
                after=_snapshot_request(cr),
            )
            _announce("change_request.opened", cr, reopened=True)
            return True
    return False


def change_requests_recheck_for_experiment(*, experiment_id: int) -> list[int]:
    """Called when a verdict of ``experiment_id`` is stored (and by the beat task): every open or
    approved request citing it is checked again. Returns the ids of requests re-opened."""
    reopened = []
    for cr in ChangeRequest.objects.filter(
        evidence__pk=experiment_id, state__in=[State.OPEN, State.APPROVED]
    ):
        if change_request_recheck(change_request=cr):
            reopened.append(cr.pk)
    return reopened


@transaction.atomic
def change_request_comment(
    *, user: AbstractBaseUser | AnonymousUser | None, change_request: ChangeRequest, body: str
) -> ChangeRequestComment:
    actor = _user(user)
    if not any(user_has_role(actor, role) for role in roles.ALL_ROLES if role != roles.VIEWER):
        raise _denied("Viewers read the discussion; experimenters, operators and managers join it.")
    if not body.strip():
        raise ApplicationError("A comment needs text.", fields={"body": ["required"]})
    comment = ChangeRequestComment.objects.create(
        change_request=change_request, author=actor, body=body.strip()
    )
    audit.record(
        actor=actor,
        action="change_request.comment",
        target=change_request,
        after={"comment": comment.pk, "body": comment.body},
    )
    return comment


def allowed_actions(cr: ChangeRequest, user: Any) -> dict[str, bool]:
    """Which controls the pages show to ``user`` (the services decide again on every POST)."""
    if not getattr(user, "is_authenticated", False) or not isinstance(user, User):
        return {
            name: False for name in ("open", "withdraw", "approve", "reject", "apply", "comment")
        }
    fresh = User.objects.get(pk=user.pk)
    manager = user_has_role(fresh, roles.MANAGER)
    return {
        "open": cr.state == State.DRAFT and cr.author_id == fresh.pk,
        "withdraw": cr.state in (State.DRAFT, State.OPEN) and cr.author_id == fresh.pk,
        "approve": cr.state == State.OPEN and not approval_refusals(cr, fresh),
        "reject": cr.state == State.OPEN and manager and cr.author_id != fresh.pk,
        "apply": cr.state == State.APPROVED and (manager or user_has_role(fresh, roles.OPERATOR)),
        "comment": any(
            user_has_role(fresh, role) for role in roles.ALL_ROLES if role != roles.VIEWER
        ),
    }
