"""Stored verdicts (PostgreSQL): recomputed from the stored runs when a run ends or is re-queued,
superseded rather than edited, announced when they change, served by the API and the pages.

The runs are the portal's own: a result file per run goes through the agent's upload and the
portal's ingestion; the files are written by the load generator's writer from constructed
requests (tests/specportal/cli/results.py), so the figures are known in advance.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from django.db import DatabaseError, transaction
from django.test import Client

from analysis.verdict_schema import check_verdict
from experiments import services
from experiments.models import Experiment
from runs import services as run_services
from runs.ingest import upload_ingest
from runs.models import Run
from tests.fixtures import Setup, api_as, create_kwargs, finish_run
from tests.specportal.cli.results import result
from verdicts import dispatch
from verdicts.models import CandidateVerdict, CellVerdict, Verdict, VerdictRequest
from verdicts.selectors import experiment_input
from verdicts.services import verdict_recompute

OBJECTIVES = {
    "schema": 2,
    "objectives": [
        {"metric": "output_throughput", "statistic": "value", "op": ">=", "threshold": 1.05,
         "scope": "relative"},
        {"metric": "tpot_ms", "statistic": "median", "op": "<=", "threshold": 0.95,
         "scope": "relative"},
    ],
}  # fmt: skip


@pytest.fixture(autouse=True)
def published(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[Any]]]:
    """No broker: the doorbell and the verdict task are recorded instead of published."""
    sent: list[tuple[str, list[Any]]] = []
    monkeypatch.setattr("runs.dispatch.publish", lambda **kwargs: None)
    monkeypatch.setattr(
        "specportal.celery_app.app.send_task",
        lambda name, args=None, **kw: sent.append((name, list(args or []))),
    )
    return sent


def _experiment(setup: Setup, repetitions: int = 4) -> Experiment:
    kwargs = create_kwargs(
        setup,
        candidates=[setup.eagle],
        labels=["baseline", "eagle3"],
        repetitions=repetitions,
        hosts=setup.hosts[:1],
        objectives=json.loads(json.dumps(OBJECTIVES)),
    )
    kwargs["workloads"] = kwargs["workloads"][:1]
    kwargs["loads"] = kwargs["loads"][:1]
    experiment = services.experiment_create(**kwargs)
    services.experiment_start(experiment=experiment)
    return Experiment.objects.get(pk=experiment.pk)


def _finish(run: Run, **figures: Any) -> None:
    """Play the agent for one run: claim, upload a result, ingest."""
    tpot = 0.004 if run.arm.label == "eagle3" else 0.01
    finish_run(run, result(tpot=tpot, seed=run.pk, **figures).to_dict())


def _run_all(experiment: Experiment) -> None:
    while run := Run.objects.filter(experiment=experiment, status=Run.Status.QUEUED).first():
        _finish(run)


def test_a_recomputed_verdict_is_stored_whole_and_served(setup: Setup) -> None:
    experiment = _experiment(setup)
    _run_all(experiment)
    verdict = verdict_recompute(experiment_id=experiment.pk)
    assert verdict is not None
    check_verdict({**verdict.document, "verdict_id": verdict.pk})
    assert verdict.objectives_sha256 == experiment.objectives_hash
    assert verdict.analysis_version == verdict.document["analysis_version"]
    assert len(verdict.inputs) == 8
    [candidate] = CandidateVerdict.objects.filter(verdict=verdict)
    assert (candidate.arm.label, candidate.state, candidate.workloads) == (
        "eagle3",
        "KEEP",
        {"chat": "KEEP"},
    )
    [cell] = CellVerdict.objects.filter(verdict=verdict)
    assert (cell.workload, cell.load, cell.state) == ("chat", "c1", "KEEP")
    assert cell.document["objectives"][0]["outcome"] == "pass"

    api = api_as(setup.viewer)
    body = api.get(f"/api/v1/experiments/{experiment.pk}/verdict/").json()
    check_verdict(body)
    assert body["verdict_id"] == verdict.pk
    assert body["emulated_label"] == "emulated: demonstrates SpecPortal, not evidence"
    assert body["cells"][0]["candidates"][0]["state"] == "KEEP"
    detail = api.get(f"/api/v1/experiments/{experiment.pk}/").json()
    assert detail["verdict"]["candidates"] == [
        {"arm": "eagle3", "state": "KEEP", "workloads": {"chat": "KEEP"}}
    ]
    assert detail["verdict"]["verdict_id"] == verdict.pk


def test_the_same_runs_give_the_same_verdict_and_a_new_run_supersedes_it(setup: Setup) -> None:
    experiment = _experiment(setup)
    runs = list(Run.objects.filter(experiment=experiment).order_by("sequence"))
    for run in runs[:6]:
        run.refresh_from_db()
        _finish(run)
    first = verdict_recompute(experiment_id=experiment.pk)
    assert first is not None
    assert verdict_recompute(experiment_id=experiment.pk) == first  # nothing changed: no new row
    _run_all(experiment)
    second = verdict_recompute(experiment_id=experiment.pk)
    assert second is not None
    assert second.pk != first.pk
    assert second.supersedes_id == first.pk
    first_again = Verdict.objects.get(pk=first.pk)
    assert first_again.document == first.document  # the old one is kept as it was
    assert len(first_again.inputs) == 6
    history = api_as(setup.viewer).get(f"/api/v1/experiments/{experiment.pk}/verdicts/").json()
    assert [h["verdict_id"] for h in history] == [second.pk, first.pk]
    assert history[0]["supersedes"] == first.pk


def test_the_database_refuses_to_edit_a_verdict(setup: Setup) -> None:
    experiment = _experiment(setup)
    _run_all(experiment)
    verdict = verdict_recompute(experiment_id=experiment.pk)
    assert verdict is not None
    edits: list[tuple[Any, dict[str, Any]]] = [
        (Verdict.objects.filter(pk=verdict.pk), {"document": {}}),
        (CandidateVerdict.objects.filter(verdict=verdict), {"state": "DROP"}),
        (CellVerdict.objects.filter(verdict=verdict), {"state": "DROP"}),
    ]
    for rows, change in edits:
        with (
            pytest.raises(DatabaseError, match="verdicts are superseded, never edited"),
            transaction.atomic(),
        ):
            rows.update(**change)
    assert Verdict.objects.get(pk=verdict.pk).document == verdict.document


def test_a_run_that_ends_or_is_requeued_publishes_the_recomputation_after_commit(
    setup: Setup, published: list[tuple[str, list[Any]]], django_capture_on_commit_callbacks: Any
) -> None:
    experiment = _experiment(setup)
    run = Run.objects.filter(experiment=experiment, status=Run.Status.QUEUED).first()
    assert run is not None
    with django_capture_on_commit_callbacks(execute=True):
        run_services.experiment_advance_later(experiment.pk, run.pk)
    assert (dispatch.TASK_NAME, [experiment.pk]) in published
    published.clear()
    with django_capture_on_commit_callbacks(execute=True):
        run.refresh_from_db()
        run_services.run_queue(run)  # attempt 2: a re-queue
    assert (dispatch.TASK_NAME, [experiment.pk]) in published


def test_a_changed_verdict_is_announced(
    setup: Setup, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(
        "notifications.emit", lambda event, payload: events.append((event, dict(payload)))
    )
    experiment = _experiment(setup)
    _run_all(experiment)
    with django_capture_on_commit_callbacks(execute=True):
        verdict = verdict_recompute(experiment_id=experiment.pk)
    assert verdict is not None
    [(_, payload)] = [e for e in events if e[0] == "verdict.changed"]
    assert payload["verdict"] == verdict.pk
    assert payload["candidates"] == [
        {"arm": "eagle3", "state": "KEEP", "workloads": {"chat": "KEEP"}}
    ]
    assert payload["changed_cells"] == ["chat/c1/eagle3"]
    with django_capture_on_commit_callbacks(execute=True):
        verdict_recompute(experiment_id=experiment.pk)
    assert len([e for e in events if e[0] == "verdict.changed"]) == 1  # unchanged: nothing new


def test_no_verdict_before_any_run_and_bad_requests_change_nothing(setup: Setup) -> None:
    experiment = _experiment(setup)
    assert verdict_recompute(experiment_id=experiment.pk) is None
    api = api_as(setup.viewer)
    missing = api.get(f"/api/v1/experiments/{experiment.pk}/verdict/")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    assert "no verdict yet" in missing.json()["error"]["message"]
    unknown = api.get(f"/api/v1/experiments/{experiment.pk}/verdict/", {"state": "KEEP"})
    assert unknown.status_code == 400
    assert "state" in unknown.json()["error"]["fields"]
    nowhere = api.get("/api/v1/experiments/999999/verdict/")
    assert nowhere.status_code == 404
    assert "error" in nowhere.json()
    refused = api.post(f"/api/v1/experiments/{experiment.pk}/verdict/", {}, format="json")
    assert refused.status_code == 405
    assert Verdict.objects.count() == 0


def test_bad_requests_to_a_stored_verdict_are_refused_in_the_error_shape_and_change_nothing(
    setup: Setup,
) -> None:
    experiment = _experiment(setup)
    _run_all(experiment)
    verdict = verdict_recompute(experiment_id=experiment.pk)
    assert verdict is not None
    stored = [
        list(model.objects.order_by("pk").values())
        for model in (Verdict, CandidateVerdict, CellVerdict)
    ]
    api = api_as(setup.experimenter)
    for path in ("verdict", "verdicts"):
        url = f"/api/v1/experiments/{experiment.pk}/{path}/"
        for method in ("post", "put", "patch", "delete"):
            answer = getattr(api, method)(url, {"state": "KEEP"}, format="json")
            assert answer.status_code == 405, (method, url)
            assert answer.json()["error"]["code"] == "method_not_allowed"
        filtered = api.get(url, {"arm": "eagle3"})
        assert filtered.status_code == 400
        assert "arm" in filtered.json()["error"]["fields"]
        anonymous = Client().get(url)
        assert anonymous.status_code in (401, 403)
        assert "error" in anonymous.json()
    after = [
        list(model.objects.order_by("pk").values())
        for model in (Verdict, CandidateVerdict, CellVerdict)
    ]
    assert after == stored


def test_the_plan_says_the_fewest_repetitions_at_which_the_family_can_decide(setup: Setup) -> None:
    experiment = _experiment(setup, repetitions=3)
    plan = api_as(setup.viewer).get(f"/api/v1/experiments/{experiment.pk}/plan/").json()
    family = plan["family"]
    assert family["family_size"] == 2
    assert family["min_repetitions"] == 4  # 1/C(8,4) = 0.014 ≤ 0.05/2 < 1/C(6,3) = 0.05
    assert family["can_decide"] is False
    assert family["reason"].startswith("at 3 repetitions per arm this family cannot decide at all")


def test_the_experiment_page_shows_the_verdict_and_the_family(setup: Setup) -> None:
    experiment = _experiment(setup)
    _run_all(experiment)
    verdict_recompute(experiment_id=experiment.pk)
    client = Client()
    client.force_login(setup.viewer)
    page = client.get(f"/experiments/{experiment.pk}/").content.decode()
    assert 'id="family"' in page
    assert "fewest repetitions per arm at which it can decide" in page
    assert 'data-candidate="eagle3"' in page
    assert "verdict pending" not in page
    assert "KEEP" in page
    assert "emulated: demonstrates SpecPortal, not evidence" in page


def test_the_task_stores_a_new_verdict_and_redraws_the_pages_figures(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verdicts.tasks import verdict_recompute_task

    redrawn: list[int] = []

    def refresh(*, experiment_id: int, samples: Any = None) -> list[str]:
        redrawn.append(experiment_id)
        return []

    monkeypatch.setattr("experiments.figures.experiment_figures_refresh", refresh)
    experiment = _experiment(setup)
    _run_all(experiment)
    first = verdict_recompute_task(experiment.pk)
    assert first == Verdict.objects.get(experiment=experiment).pk
    assert redrawn == [experiment.pk]
    assert verdict_recompute_task(experiment.pk) == first  # unchanged: nothing redrawn
    assert redrawn == [experiment.pk]


def test_runs_landing_together_share_one_computation_and_the_last_request_always_computes(
    setup: Setup,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from verdicts import services as verdict_services
    from verdicts.tasks import verdict_recompute_task

    monkeypatch.setattr("experiments.figures.experiment_figures_refresh", lambda **kwargs: [])
    computed: list[int] = []
    real = verdict_services.verdict_recompute

    def counting(*, experiment_id: int) -> Verdict | None:
        computed.append(experiment_id)
        return real(experiment_id=experiment_id)

    monkeypatch.setattr(verdict_services, "verdict_recompute", counting)
    experiment = _experiment(setup)
    _run_all(experiment)
    runs = Run.objects.filter(experiment=experiment).count()
    for run in Run.objects.filter(experiment=experiment):  # what each run's end asks for
        dispatch.on_run_changed(Run, experiment_id=experiment.pk, run_id=run.pk)
    assert VerdictRequest.objects.get(pk=experiment.pk).requested == runs
    # no verdict yet: even an overtaken request computes (there is nothing fresh to wait for)
    first = verdict_recompute_task(experiment.pk, request=1)
    assert first is not None
    assert computed == [experiment.pk]
    # a fresh verdict and a newer request pending: the overtaken task skips
    assert verdict_recompute_task(experiment.pk, request=runs - 1) == first
    assert computed == [experiment.pk]
    # the newest request computes (here: nothing changed, so the same verdict)
    assert verdict_recompute_task(experiment.pk, request=runs) == first
    assert computed == [experiment.pk, experiment.pk]
    # a stale verdict is not waited on: the overtaken task computes too
    settings.SPECPORTAL_VERDICT_STALE_SECONDS = 0.0
    verdict_recompute_task(experiment.pk, request=1)
    assert len(computed) == 3
    # what is published: the request's count, a little later
    sent: list[tuple[list[Any], dict[str, Any]]] = []
    monkeypatch.setattr(
        "specportal.celery_app.app.send_task",
        lambda name, args=None, kwargs=None, **kw: sent.append((list(args), {**kwargs, **kw})),
    )
    settings.SPECPORTAL_VERDICT_DELAY_SECONDS = 1.5
    with django_capture_on_commit_callbacks(execute=True):
        dispatch.recompute_later(experiment.pk)
    assert sent == [([experiment.pk], {"request": runs + 1, "countdown": 1.5})]


def test_a_candidate_whose_engine_never_starts_drops_but_a_lost_upload_does_not(
    setup: Setup,
) -> None:
    experiment = _experiment(setup)
    while run := Run.objects.filter(experiment=experiment, status=Run.Status.QUEUED).first():
        if run.arm.label == "baseline":
            _finish(run)
            continue
        run_services.run_claim(host=run.host, run_id=run.pk, attempt=run.attempt)
        envelope = {"schema": 1, "run": run.pk, "attempt": run.attempt, "outcome": "failed",
                    "error": "engine exited before /health: CUDA out of memory", "engine": {},
                    "result": None}  # fmt: skip
        upload = run_services.run_result_receive(
            host=run.host, run_id=run.pk, attempt=run.attempt,
            body=gzip.compress(json.dumps(envelope).encode()),
        )  # fmt: skip
        upload_ingest(upload_id=upload.pk)
        services.experiment_advance(experiment_id=experiment.pk)
    verdict = verdict_recompute(experiment_id=experiment.pk)
    assert verdict is not None
    entry = verdict.document["cells"][0]["candidates"][0]
    assert entry["state"] == "DROP"
    assert "CUDA out of memory" in entry["guards"][0]["reason"]
    # the same runs failed by the portal (an unreadable upload) are nobody's failure
    Run.objects.filter(experiment=experiment, arm__label="eagle3").update(
        error="unreadable result upload: truncated gzip"
    )
    engine_input, _ = experiment_input(experiment=experiment)
    failed = [r for r in engine_input.runs if r.arm == "eagle3"]
    assert failed
    assert not any(r.failed_to_start for r in failed)
