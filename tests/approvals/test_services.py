"""Every transition of a change request and every refusal, on PostgreSQL (the services; the API
and the pages call these and are tested for the same answers in test_apis / test_pages)."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from accounts import roles
from accounts.services import user_create_or_update
from approvals import selectors, services
from approvals.models import ChangeRequest, DeploymentPeriod
from audit.models import AuditEvent
from audit.selectors import events_for
from configurations.services import configuration_create
from notifications.models import Delivery, Webhook
from specportal.api.errors import ApplicationError
from tests.approvals.helpers import (
    ALL_KEEP,
    deployment,
    finished_experiment,
    opened,
    person,
    real_host,
    verdict_document,
    verdicts,
)
from tests.fixtures import EAGLE, OBJECTIVES, Setup

__all__ = ["verdicts"]
pytestmark = pytest.mark.django_db
State = ChangeRequest.State


@pytest.fixture
def world(setup: Setup, verdicts: dict[int, Any]) -> dict[str, Any]:
    """A real-host experiment whose n-gram candidate KEEPs everywhere, a deployment on its
    baseline, two managers and an operator."""
    mia = person("mia", roles.MANAGER)
    max_ = person("max", roles.MANAGER)
    otto = person("otto", roles.OPERATOR)
    host = real_host()
    experiment = finished_experiment(setup, hosts=[host])
    verdicts[experiment.pk] = verdict_document(experiment, ALL_KEEP)
    dep = deployment(setup, mia)
    return {"s": setup, "mia": mia, "max": max_, "otto": otto, "host": host,
            "experiment": experiment, "dep": dep, "verdicts": verdicts}  # fmt: skip


def _refused(call: Any, status: int, code: str) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        call()
    assert (caught.value.status_code, caught.value.code) == (status, code), caught.value.message
    return caught.value


# --- the happy path -----------------------------------------------------------------------------


def test_open_approve_apply_moves_the_deployment_and_records_its_history(
    world: dict[str, Any],
) -> None:
    s, dep, mia, otto = world["s"], world["dep"], world["mia"], world["otto"]
    hook = Webhook.objects.create(
        owner=mia, url="https://hooks.example.org/sp", secret="s" * 32,
        events=["change_request.opened", "change_request.decided", "change_request.applied"],
    )  # fmt: skip
    registered_at = dep.periods.get().started_at
    cr = opened(s, dep, world["experiment"])
    assert cr.state == State.OPEN
    assert cr.from_configuration == s.baseline
    check = cr.checks.get()
    assert check.passed, [line for line in check.rules["lines"] if not line["passed"]]
    assert {line["rule"] for line in check.rules["lines"]} >= {
        "finished", "baseline_is_a", "candidate_is_b", "objectives", "lock_before_first_run",
        "not_emulated", "verdict", "keep",
    }  # fmt: skip
    lock_line = next(x for x in check.rules["lines"] if x["rule"] == "lock_before_first_run")
    assert lock_line["locked_at"] < lock_line["first_run_started_at"]
    cr = services.change_request_approve(user=mia, change_request=cr)
    assert (cr.state, cr.decided_by, cr.against_evidence) == (State.APPROVED, mia, False)
    assert cr.expires_at is not None
    assert cr.checks.count() == 2  # checked again at approval
    cr = services.change_request_apply(user=otto, change_request=cr)
    assert cr.state == State.APPLIED
    dep.refresh_from_db()
    assert dep.configuration == s.ngram
    history = list(selectors.deployment_history(deployment=dep))
    assert [p.configuration for p in history] == [s.ngram, s.baseline]
    assert history[0].ended_at is None
    assert history[1].ended_at == history[0].started_at
    assert (history[0].approved_by, history[0].applied_by) == (mia, otto)
    assert history[0].evidence["experiments"] == [world["experiment"].pk]
    # "as of": which configuration served the deployment at a given moment
    as_of = selectors.deployment_configuration_as_of
    assert as_of(deployment=dep, when=registered_at - timedelta(seconds=1)) is None
    assert as_of(deployment=dep, when=history[0].started_at - timedelta(microseconds=1)).configuration == s.baseline  # type: ignore[union-attr]  # fmt: skip
    assert as_of(deployment=dep, when=timezone.now()).configuration == s.ngram  # type: ignore[union-attr]
    # every step is in the audit trail, with its actor
    actions = list(events_for(cr).order_by("seq").values_list("action", "actor_name"))
    assert [a for a, _ in actions] == [
        "change_request.create", "change_request.evidence_check", "change_request.open",
        "change_request.evidence_check", "change_request.approve", "change_request.apply",
    ]  # fmt: skip
    assert ("change_request.approve", "mia") in actions
    # announced through notifications.emit, in the same transactions
    sent = [
        (d.event, json.loads(d.body)["payload"])
        for d in Delivery.objects.filter(webhook=hook).order_by("pk")
    ]
    assert [(event, p["state"], p.get("decision")) for event, p in sent] == [
        ("change_request.opened", "open", None),
        ("change_request.decided", "approved", "approved"),
        ("change_request.applied", "applied", None),
    ]
    assert sent[0][1]["url_path"] == f"/change-requests/{cr.pk}/"
    change = events_for(dep).filter(action="deployment.configuration_change").get()
    assert (
        (change.before or {})["configuration_id"],
        (change.after or {})["configuration_id"],
    ) == (
        s.baseline.pk,
        s.ngram.pk,
    )


# --- illegal transitions: a clear 409 from every state ----------------------------------------


LEGAL: dict[str, set[str]] = {
    State.DRAFT: {"open", "withdraw"},
    State.OPEN: {"withdraw", "approve", "reject"},
    State.APPROVED: {"apply"},
    State.REJECTED: set(),
    State.WITHDRAWN: set(),
    State.APPLIED: set(),
    State.EXPIRED: set(),
}


def _into(world: dict[str, Any], state: str) -> Any:
    s, dep = world["s"], world["dep"]
    cr = services.change_request_create(
        user=s.experimenter, deployment=dep, to_configuration=s.ngram, reason="r",
        evidence=[world["experiment"]],
    )  # fmt: skip
    if state == State.DRAFT:
        return cr
    if state == State.WITHDRAWN:
        return services.change_request_withdraw(user=s.experimenter, change_request=cr)
    cr = services.change_request_open(user=s.experimenter, change_request=cr)
    if state == State.OPEN:
        return cr
    if state == State.REJECTED:
        return services.change_request_reject(user=world["mia"], change_request=cr, note="no")
    cr = services.change_request_approve(user=world["mia"], change_request=cr)
    if state == State.APPROVED:
        return cr
    if state == State.EXPIRED:
        services.change_requests_expire_due(now=timezone.now() + timedelta(days=30))
        return ChangeRequest.objects.get(pk=cr.pk)
    return services.change_request_apply(user=world["otto"], change_request=cr)


ACTIONS = {
    "open": lambda w, cr: services.change_request_open(user=w["s"].experimenter, change_request=cr),
    "withdraw": lambda w, cr: services.change_request_withdraw(user=w["s"].experimenter, change_request=cr),
    "approve": lambda w, cr: services.change_request_approve(user=w["mia"], change_request=cr, justification="j"),
    "reject": lambda w, cr: services.change_request_reject(user=w["mia"], change_request=cr, note="n"),
    "apply": lambda w, cr: services.change_request_apply(user=w["otto"], change_request=cr),
}  # fmt: skip


@pytest.mark.parametrize("state", list(LEGAL))
def test_every_illegal_transition_is_a_409_and_changes_nothing(
    world: dict[str, Any], state: str
) -> None:
    cr = _into(world, state)
    assert cr.state == state
    for action, call in ACTIONS.items():
        if action in LEGAL[state]:
            continue
        before = AuditEvent.objects.count()
        error = _refused(lambda c=call: c(world, cr), 409, "illegal_transition")
        assert f"is {state}: it cannot {action}" in error.message
        assert ChangeRequest.objects.get(pk=cr.pk).state == state
        assert AuditEvent.objects.count() == before


def test_a_stale_copy_cannot_overwrite_a_decision(world: dict[str, Any]) -> None:
    """The state column is updated only where it still holds what was read (django-fsm-2's
    conditional UPDATE), beside the row lock."""
    cr = _into(world, State.OPEN)
    stale = ChangeRequest.objects.get(pk=cr.pk)
    services.change_request_approve(user=world["mia"], change_request=cr)
    stale.reject()

    def save_stale() -> None:
        with transaction.atomic():  # as every service runs; the failed save dooms only this
            services._save(stale)

    _refused(save_stale, 409, "concurrent_transition")
    assert ChangeRequest.objects.get(pk=cr.pk).state == State.APPROVED


# --- who may act --------------------------------------------------------------------------------


def test_the_author_never_approves_their_own_request_even_as_a_manager(
    world: dict[str, Any],
) -> None:
    s, dep = world["s"], world["dep"]
    boss = person("boss", roles.MANAGER, roles.EXPERIMENTER)
    cr = opened(s, dep, world["experiment"], author=boss)
    error = _refused(
        lambda: services.change_request_approve(user=boss, change_request=cr), 403, "four_eyes"
    )
    assert "the author of this change request" in error.message
    _refused(
        lambda: services.change_request_reject(user=boss, change_request=cr, note="x"),
        403,
        "permission_denied",
    )
    assert (
        services.change_request_approve(user=world["mia"], change_request=cr).state
        == State.APPROVED
    )


def test_the_evidence_creator_and_the_candidate_storer_may_not_approve(
    world: dict[str, Any],
) -> None:
    s, dep, mia, verdict_store = world["s"], world["dep"], world["mia"], world["verdicts"]
    # mia created the evidence experiment (as a manager-experimenter)
    user_create_or_update(
        username="mia", password=None, role_names=[roles.MANAGER, roles.EXPERIMENTER]
    )
    experiment = finished_experiment(s, user=mia, hosts=[world["host"]])
    verdict_store[experiment.pk] = verdict_document(experiment, ALL_KEEP)
    cr = opened(s, dep, experiment)
    error = _refused(
        lambda: services.change_request_approve(user=mia, change_request=cr), 403, "four_eyes"
    )
    assert f"creator of evidence experiment #{experiment.pk}" in error.message
    # max first stored the candidate configuration
    max_ = world["max"]
    k2, _ = configuration_create(
        document={**copy.deepcopy(EAGLE), "proposal": {**EAGLE["proposal"], "num_speculative_tokens": 2}},
        name="eagle3-k2", created_by=max_,
    )  # fmt: skip
    experiment2 = finished_experiment(s, candidate=k2, hosts=[world["host"]])
    verdict_store[experiment2.pk] = verdict_document(experiment2, ALL_KEEP)
    cr2 = opened(s, dep, experiment2, to=k2)
    error = _refused(
        lambda: services.change_request_approve(user=max_, change_request=cr2), 403, "four_eyes"
    )
    assert "first stored the candidate configuration" in error.message
    assert services.change_request_approve(user=mia, change_request=cr2).state == State.APPROVED


def test_self_approval_is_allowed_only_for_a_named_reason_and_recorded(
    world: dict[str, Any],
) -> None:
    s, dep = world["s"], world["dep"]
    boss = person("boss", roles.MANAGER, roles.EXPERIMENTER)
    services.deployment_update(
        user=world["mia"], deployment=dep, self_approval_reason="two-person team, on call alone"
    )
    cr = opened(s, dep, world["experiment"], author=boss)
    cr = services.change_request_approve(user=boss, change_request=cr)
    assert cr.state == State.APPROVED
    assert cr.self_approval_reason == (
        "the author of this change request; allowed: two-person team, on call alone"
    )
    event = events_for(cr).get(action="change_request.approve")
    assert "two-person team" in (event.after or {})["self_approval_reason"]


def test_only_managers_decide_and_a_demotion_mid_review_takes_effect_at_once(
    world: dict[str, Any],
) -> None:
    s, dep, mia = world["s"], world["dep"], world["mia"]
    cr = opened(s, dep, world["experiment"])
    _refused(
        lambda: services.change_request_approve(user=world["otto"], change_request=cr),
        403,
        "permission_denied",
    )
    # mia is a manager when the review starts (she could decide) ...
    assert services.allowed_actions(cr, mia)["approve"]
    # ... and is demoted before she clicks: the same user object, the database's roles decide
    user_create_or_update(username="mia", password=None, role_names=[roles.VIEWER])
    assert not services.allowed_actions(cr, mia)["approve"]
    _refused(
        lambda: services.change_request_approve(user=mia, change_request=cr),
        403,
        "permission_denied",
    )
    assert ChangeRequest.objects.get(pk=cr.pk).state == State.OPEN
    # promoted again: decides
    user_create_or_update(username="mia", password=None, role_names=[roles.MANAGER])
    assert services.change_request_approve(user=mia, change_request=cr).state == State.APPROVED


def test_only_the_author_opens_and_withdraws_and_viewers_propose_nothing(
    world: dict[str, Any],
) -> None:
    s, dep = world["s"], world["dep"]
    draft = services.change_request_create(
        user=s.experimenter, deployment=dep, to_configuration=s.ngram, reason="r",
        evidence=[world["experiment"]],
    )  # fmt: skip
    other = person("eve", roles.EXPERIMENTER)
    _refused(
        lambda: services.change_request_open(user=other, change_request=draft),
        403,
        "permission_denied",
    )
    _refused(
        lambda: services.change_request_withdraw(user=world["mia"], change_request=draft),
        403,
        "permission_denied",
    )
    _refused(
        lambda: services.change_request_create(
            user=s.viewer, deployment=dep, to_configuration=s.ngram, reason="r", evidence=[]
        ),
        403, "permission_denied",
    )  # fmt: skip
    _refused(lambda: services.change_request_apply(user=s.experimenter, change_request=_into(world, State.APPROVED)), 403, "permission_denied")  # fmt: skip


# --- evidence -----------------------------------------------------------------------------------


def test_missing_evidence_cannot_open(world: dict[str, Any]) -> None:
    s, dep = world["s"], world["dep"]
    error = _refused(
        lambda: services.change_request_create(
            user=s.experimenter, deployment=dep, to_configuration=s.ngram, reason="trust me",
            evidence=[], open_now=True,
        ),
        409, "missing_evidence",
    )  # fmt: skip
    assert error.fields == {"evidence": ["required"]}
    assert not ChangeRequest.objects.exists()  # nothing half-saved


@pytest.mark.parametrize("state", ["DROP", "INCONCLUSIVE"])
def test_insufficient_evidence_needs_a_justification_and_is_marked_against_the_evidence(
    world: dict[str, Any], state: str
) -> None:
    s, dep, experiment = world["s"], world["dep"], world["experiment"]
    world["verdicts"][experiment.pk] = verdict_document(
        experiment, {**ALL_KEEP, ("code", "c8"): state}
    )
    cr = opened(s, dep, experiment)
    check = cr.checks.get()
    assert not check.passed
    failing = [x for x in check.rules["lines"] if not x["passed"]]
    assert [x["rule"] for x in failing] == ["keep"]
    assert failing[0]["message"].startswith(f"code × c8: {state} in experiment")
    # without a justification: refused, nothing changes
    error = _refused(
        lambda: services.change_request_approve(user=world["mia"], change_request=cr),
        409,
        "evidence_insufficient",
    )
    assert "keep" in error.message
    assert error.fields == {"justification": ["required when the evidence rules fail"]}
    assert ChangeRequest.objects.get(pk=cr.pk).state == State.OPEN
    # with one: approved, against the evidence, and the history says so
    cr = services.change_request_approve(
        user=world["mia"], change_request=cr, justification="code traffic is 2 % of chat-prod"
    )
    assert (cr.state, cr.against_evidence) == (State.APPROVED, True)
    cr = services.change_request_apply(user=world["otto"], change_request=cr)
    period = DeploymentPeriod.objects.get(change_request=cr)
    assert period.against_evidence
    assert period.evidence["justification"] == "code traffic is 2 % of chat-prod"


def test_incomplete_evidence_a_workload_not_measured(world: dict[str, Any]) -> None:
    s, dep, verdict_store = world["s"], world["dep"], world["verdicts"]
    from tests.fixtures import WORKLOADS

    experiment = finished_experiment(
        s, hosts=[world["host"]], workloads=[copy.deepcopy(WORKLOADS[0])]
    )
    verdict_store[experiment.pk] = verdict_document(
        experiment, {("chat", "c1"): "KEEP", ("chat", "c8"): "KEEP"}
    )
    cr = opened(s, dep, experiment)
    failing = [x for x in cr.checks.get().rules["lines"] if not x["passed"]]
    assert [x["rule"] for x in failing] == ["coverage", "coverage"]
    assert all("code × c" in x["message"] and "incomplete" in x["message"] for x in failing)


def test_cells_are_matched_by_content_not_by_name(world: dict[str, Any]) -> None:
    """A workload called "code" that asks for something else is not the deployment's "code"."""
    s, dep, verdict_store = world["s"], world["dep"], world["verdicts"]
    from tests.fixtures import WORKLOADS

    renamed = copy.deepcopy(WORKLOADS)
    renamed[0]["name"] = "assistant"  # same content as "chat": still matches
    renamed[1]["output_len"] = 64  # same name "code", other content: does not
    experiment = finished_experiment(s, hosts=[world["host"]], workloads=renamed)
    verdict_store[experiment.pk] = verdict_document(
        experiment, {(w, lo): "KEEP" for w in ("assistant", "code") for lo in ("c1", "c8")}
    )
    lines = opened(s, dep, experiment).checks.get().rules["lines"]
    keep = [x for x in lines if x["rule"] == "keep"]
    coverage = [x for x in lines if x["rule"] == "coverage"]
    assert [x["cell"] for x in keep] == [["chat", "c1"], ["chat", "c8"]]
    assert "(assistant/c1)" in keep[0]["message"]
    assert [x["cell"] for x in coverage] == [["code", "c1"], ["code", "c8"]]


def test_emulated_evidence_counts_against_unless_the_deployment_is_a_demo(
    world: dict[str, Any],
) -> None:
    s, verdict_store = world["s"], world["verdicts"]
    experiment = finished_experiment(s)  # setup's hosts are emulated
    verdict_store[experiment.pk] = verdict_document(experiment, ALL_KEEP, emulated=True)
    cr = opened(s, world["dep"], experiment)
    line = next(x for x in cr.checks.get().rules["lines"] if x["rule"] == "not_emulated")
    assert not line["passed"]
    assert "emulated figures are not evidence" in line["message"]
    demo = deployment(s, world["mia"], name="chat-demo", is_demo=True)
    cr = opened(s, demo, experiment)
    assert cr.checks.get().passed
    line = next(x for x in cr.checks.get().rules["lines"] if x["rule"] == "not_emulated")
    assert "demo deployment" in line["message"]


def test_objectives_must_be_the_deployments_or_accepted_as_stricter_by_someone_else(
    world: dict[str, Any],
) -> None:
    s, dep, verdict_store = world["s"], world["dep"], world["verdicts"]
    stricter = copy.deepcopy(OBJECTIVES)
    stricter["objectives"][0]["threshold"] = 300
    experiment = finished_experiment(s, hosts=[world["host"]], objectives=stricter)
    verdict_store[experiment.pk] = verdict_document(experiment, ALL_KEEP)

    def line(cr: ChangeRequest) -> dict[str, Any]:
        check = cr.checks.first()
        assert check is not None
        found: dict[str, Any] = next(x for x in check.rules["lines"] if x["rule"] == "objectives")
        return found

    cr = opened(s, dep, experiment)
    assert not line(cr)["passed"]
    # accepted by the change's author (here also a manager): still refused
    user_create_or_update(
        username="alice", password=None, role_names=[roles.EXPERIMENTER, roles.MANAGER]
    )
    services.deployment_objectives_accept(
        user=s.experimenter, deployment=dep, objectives=stricter, reason="p99 300 ms"
    )
    services.change_request_withdraw(user=s.experimenter, change_request=cr)
    cr = opened(s, dep, experiment)
    assert not line(cr)["passed"]
    assert "accepted by this change's author" in line(cr)["message"]
    # accepted by the owner's manager (someone else): counts
    dep.accepted_objectives.all().delete()
    services.deployment_objectives_accept(
        user=world["mia"], deployment=dep, objectives=stricter, reason="p99 300 ms"
    )
    services.change_request_withdraw(user=s.experimenter, change_request=cr)
    cr = opened(s, dep, experiment)
    assert line(cr)["passed"]
    assert cr.checks.get(stage="open").passed


def test_a_run_started_before_the_lock_counts_against(world: dict[str, Any]) -> None:
    s, verdict_store = world["s"], world["verdicts"]
    experiment = finished_experiment(s, hosts=[world["host"]], run_offset_seconds=-60)
    verdict_store[experiment.pk] = verdict_document(experiment, ALL_KEEP)
    line = next(
        x for x in opened(s, world["dep"], experiment).checks.get().rules["lines"]
        if x["rule"] == "lock_before_first_run"
    )  # fmt: skip
    assert not line["passed"]
    assert line["locked_at"] > line["first_run_started_at"]
    assert "the lock does not precede the first run" in line["message"]


def test_a_wrong_baseline_or_a_missing_candidate_is_not_evidence(world: dict[str, Any]) -> None:
    s, dep = world["s"], world["dep"]
    cr = opened(s, dep, world["experiment"], to=s.eagle)  # the experiment measured n-gram only
    failing = {x["rule"] for x in cr.checks.get().rules["lines"] if not x["passed"]}
    assert {"candidate_is_b", "verdict"} <= failing


def test_a_pending_verdict_fails_the_check(world: dict[str, Any]) -> None:
    world["verdicts"].clear()
    cr = opened(world["s"], world["dep"], world["experiment"])
    line = next(x for x in cr.checks.get().rules["lines"] if x["rule"] == "verdict")
    assert (line["passed"], line["message"].endswith("verdict pending (none stored yet).")) == (
        False,
        True,
    )


def test_imported_runs_the_verdict_cannot_date_count_against(world: dict[str, Any]) -> None:
    experiment = world["experiment"]
    world["verdicts"][experiment.pk] = verdict_document(experiment, ALL_KEEP, imported=True)
    line = next(
        x for x in opened(world["s"], world["dep"], experiment).checks.get().rules["lines"]
        if x["rule"] == "imported_runs"
    )  # fmt: skip
    assert not line["passed"]
    assert line["imported"] is True


# --- a superseding verdict, expiry, supersession by another change ------------------------------


def test_a_superseding_verdict_reopens_an_approved_request(world: dict[str, Any]) -> None:
    s, dep, experiment = world["s"], world["dep"], world["experiment"]
    cr = services.change_request_approve(
        user=world["mia"], change_request=opened(s, dep, experiment)
    )
    # nothing new: no re-check
    assert services.change_requests_recheck_for_experiment(experiment_id=experiment.pk) == []
    # a re-run's verdict supersedes the evidence and drops a cell
    world["verdicts"][experiment.pk] = verdict_document(
        experiment, {**ALL_KEEP, ("chat", "c8"): "DROP"}, verdict_id=2, supersedes=1
    )
    assert services.change_requests_recheck_for_experiment(experiment_id=experiment.pk) == [cr.pk]
    cr.refresh_from_db()
    assert (cr.state, cr.decided_by) == (State.OPEN, None)
    assert cr.checks.filter(stage="recheck").get().verdict_ids == {str(experiment.pk): 2}
    assert events_for(cr).filter(action="change_request.reopen").exists()
    _refused(
        lambda: services.change_request_approve(user=world["mia"], change_request=cr),
        409,
        "evidence_insufficient",
    )


def test_apply_rechecks_and_refuses_when_the_evidence_was_superseded(world: dict[str, Any]) -> None:
    s, experiment = world["s"], world["experiment"]
    cr = services.change_request_approve(
        user=world["mia"], change_request=opened(s, world["dep"], experiment)
    )
    world["verdicts"][experiment.pk] = verdict_document(
        experiment, {**ALL_KEEP, ("chat", "c1"): "INCONCLUSIVE"}, verdict_id=3, supersedes=1
    )
    _refused(
        lambda: services.change_request_apply(user=world["otto"], change_request=cr),
        409,
        "evidence_superseded",
    )
    assert ChangeRequest.objects.get(pk=cr.pk).state == State.OPEN  # committed, not rolled back
    world["dep"].refresh_from_db()
    assert world["dep"].configuration == s.baseline


def test_approved_requests_expire_when_not_applied_in_time(world: dict[str, Any]) -> None:
    s = world["s"]
    cr = services.change_request_approve(
        user=world["mia"], change_request=opened(s, world["dep"], world["experiment"])
    )
    assert services.change_requests_expire_due(now=timezone.now()) == []
    assert cr.expires_at is not None
    later = cr.expires_at + timedelta(seconds=1)
    assert services.change_requests_expire_due(now=later) == [cr.pk]
    cr.refresh_from_db()
    assert cr.state == State.EXPIRED
    assert cr.closed_reason == "not applied within 14 days"
    event = events_for(cr).get(action="change_request.expire")
    assert (event.actor_kind, event.actor_name) == (
        "system",
        "approvals.change_requests_expire_task",
    )
    _refused(
        lambda: services.change_request_apply(user=world["otto"], change_request=cr),
        409,
        "illegal_transition",
    )


def test_applying_one_change_expires_the_other_approved_changes_from_a(
    world: dict[str, Any],
) -> None:
    s, dep, verdict_store = world["s"], world["dep"], world["verdicts"]
    eagle_experiment = finished_experiment(s, candidate=s.eagle, hosts=[world["host"]])
    verdict_store[eagle_experiment.pk] = verdict_document(eagle_experiment, ALL_KEEP)
    first = services.change_request_approve(
        user=world["mia"], change_request=opened(s, dep, world["experiment"])
    )
    second = services.change_request_approve(
        user=world["mia"], change_request=opened(s, dep, eagle_experiment, to=s.eagle)
    )
    services.change_request_apply(user=world["otto"], change_request=second)
    first.refresh_from_db()
    assert first.state == State.EXPIRED
    assert first.closed_reason.startswith(f"superseded by change request #{second.pk}")


def test_a_request_from_a_configuration_the_deployment_left_is_stale(world: dict[str, Any]) -> None:
    s, dep, verdict_store = world["s"], world["dep"], world["verdicts"]
    eagle_experiment = finished_experiment(s, candidate=s.eagle, hosts=[world["host"]])
    verdict_store[eagle_experiment.pk] = verdict_document(eagle_experiment, ALL_KEEP)
    pending = opened(s, dep, world["experiment"])
    applied = services.change_request_approve(
        user=world["mia"], change_request=opened(s, dep, eagle_experiment, to=s.eagle)
    )
    services.change_request_apply(user=world["otto"], change_request=applied)
    _refused(
        lambda: services.change_request_approve(user=world["mia"], change_request=pending),
        409,
        "stale",
    )


def test_comments_are_kept_and_audited(world: dict[str, Any]) -> None:
    s = world["s"]
    cr = opened(s, world["dep"], world["experiment"])
    services.change_request_comment(user=world["mia"], change_request=cr, body="Why not EAGLE-3?")
    _refused(
        lambda: services.change_request_comment(user=s.viewer, change_request=cr, body="hi"),
        403,
        "permission_denied",
    )
    assert [c.body for c in cr.comments.all()] == ["Why not EAGLE-3?"]
    assert (events_for(cr).filter(action="change_request.comment").get().after or {})[
        "body"
    ] == "Why not EAGLE-3?"


def test_deployment_documents_are_validated_whole(setup: Setup) -> None:
    mia = person("mia", roles.MANAGER)
    error = _refused(
        lambda: deployment(setup, mia, workloads=[{"name": "chat", "dataset_nmae": "bundled"}],
                           loads=[], objectives={"schema": 1, "objectives": []}),
        400, "invalid",
    )  # fmt: skip
    assert "workloads.0.dataset_nmae" in error.fields
    assert "loads" in error.fields
    assert "objectives.objectives" in error.fields
    _refused(lambda: deployment(setup, setup.experimenter), 403, "permission_denied")
