"""K-by-batch advice, measured: the verdict's advised schedule is stored as a candidate and a draft
follow-up experiment is created with one API call (or the page's button); too few load levels to
advise is said plainly, and refused requests change nothing."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.test import Client

from configurations.models import FrozenConfiguration
from experiments import services
from experiments.models import Experiment
from runs.models import Run
from specportal.engines.lint import lint
from tests.fixtures import LOADS, Setup, api_as, create_kwargs, finish_run
from tests.specportal.cli.results import result
from verdicts.services import verdict_recompute

ACCEPTANCE = {
    "acceptance_rate": 0.6,
    "mean_acceptance_length": 2.2,
    "per_position": [0.8, 0.6, 0.4],
}


@pytest.fixture(autouse=True)
def no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("runs.dispatch.publish", lambda **kwargs: None)
    monkeypatch.setattr("specportal.celery_app.app.send_task", lambda *a, **kw: None)


def _measured(setup: Setup, loads: list[dict[str, Any]]) -> Experiment:
    kwargs = create_kwargs(
        setup, candidates=[setup.eagle], labels=["baseline", "eagle3"], repetitions=3,
        hosts=setup.hosts[:1], loads=copy.deepcopy(loads),
    )  # fmt: skip
    kwargs["workloads"] = kwargs["workloads"][:1]
    experiment = services.experiment_create(**kwargs)
    services.experiment_start(experiment=experiment)
    while run := Run.objects.filter(experiment=experiment, status=Run.Status.QUEUED).first():
        eagle = run.arm.label == "eagle3"
        document = result(
            tpot=0.006 if eagle else 0.01, seed=run.pk, acceptance=ACCEPTANCE if eagle else None
        ).to_dict()
        finish_run(run, document)
    assert verdict_recompute(experiment_id=experiment.pk) is not None
    return Experiment.objects.get(pk=experiment.pk)


def test_one_call_stores_the_advised_candidate_and_a_draft_follow_up_experiment(
    setup: Setup,
) -> None:
    experiment = _measured(setup, LOADS)  # c1 and c8
    api = api_as(setup.experimenter)
    verdict = api.get(f"/api/v1/experiments/{experiment.pk}/verdict/").json()
    (advice,) = verdict["candidates"][0]["advice"]
    assert advice["available"] is True, advice
    created = api.post(
        f"/api/v1/experiments/{experiment.pk}/follow-up/", {"arm": "eagle3"}, format="json"
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["labels"] == ["baseline", "eagle3", "eagle3-advised"]
    follow_up = Experiment.objects.get(pk=body["experiment"])
    assert follow_up.status == Experiment.Status.DRAFT
    assert body["url"] == f"/experiments/{follow_up.pk}/"
    assert [w["name"] for w in follow_up.workloads] == [advice["workload"]]
    assert follow_up.loads == experiment.loads
    assert follow_up.objectives == experiment.objectives
    assert follow_up.repetitions == experiment.repetitions
    advised = FrozenConfiguration.objects.get(pk=body["configuration"])
    proposal = advised.document["proposal"]
    assert proposal["num_speculative_tokens_per_batch_size"] == advice["schedule"]
    assert proposal["num_speculative_tokens"] == max(k for _, _, k in advice["schedule"])
    # the stored candidate passes the linter, and the follow-up can be planned and measured
    assert not [f for f in lint(advised.document) if f.severity == "error"]
    plan = api.post(f"/api/v1/experiments/{follow_up.pk}/plan/", {}, format="json")
    assert plan.status_code == 200, plan.json()
    assert Run.objects.filter(experiment=follow_up).count() == 3 * 2 * 3


def test_too_few_load_levels_is_said_plainly_and_refused_with_nothing_stored(
    setup: Setup,
) -> None:
    experiment = _measured(setup, LOADS[:1])  # c1 alone
    experiments, configurations = Experiment.objects.count(), FrozenConfiguration.objects.count()
    api = api_as(setup.experimenter)
    refused = api.post(
        f"/api/v1/experiments/{experiment.pk}/follow-up/", {"arm": "eagle3"}, format="json"
    )
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "no_advice"
    assert "too few load levels to advise" in refused.json()["error"]["message"]
    # the page says it too, and its button is absent
    page = Client()
    page.force_login(setup.experimenter)
    html = page.get(f"/experiments/{experiment.pk}/").content.decode()
    assert "No K-by-batch advice for chat: too few load levels to advise" in html
    assert "Measure this schedule" not in html
    answer = page.post(f"/experiments/{experiment.pk}/follow-up/", {"arm": "eagle3"})
    assert answer.status_code == 409
    assert "too few load levels to advise" in answer.content.decode()
    assert Experiment.objects.count() == experiments
    assert FrozenConfiguration.objects.count() == configurations


def test_bad_follow_up_requests_are_refused_in_the_error_shape(setup: Setup) -> None:
    experiment = _measured(setup, LOADS)
    count = Experiment.objects.count()
    url = f"/api/v1/experiments/{experiment.pk}/follow-up/"
    api = api_as(setup.experimenter)
    unknown_arm = api.post(url, {"arm": "medusa"}, format="json")
    assert unknown_arm.status_code == 400
    assert "medusa" in unknown_arm.json()["error"]["fields"]["arm"][0]
    baseline = api.post(url, {"arm": "baseline"}, format="json")
    assert baseline.status_code == 400
    unknown_workload = api.post(url, {"arm": "eagle3", "workload": "math"}, format="json")
    assert unknown_workload.status_code == 400
    assert "workload" in unknown_workload.json()["error"]["fields"]
    unknown_field = api.post(url, {"arm": "eagle3", "k": 3}, format="json")
    assert unknown_field.status_code == 400
    missing = api.post(url, {}, format="json")
    assert missing.status_code == 400
    assert "arm" in missing.json()["error"]["fields"]
    viewer = api_as(setup.viewer).post(url, {"arm": "eagle3"}, format="json")
    assert viewer.status_code == 403
    nowhere = api.post("/api/v1/experiments/999999/follow-up/", {"arm": "eagle3"}, format="json")
    assert nowhere.status_code == 404
    assert Experiment.objects.count() == count


def test_the_page_offers_the_advice_as_a_button_that_creates_the_follow_up(setup: Setup) -> None:
    experiment = _measured(setup, LOADS)
    page = Client()
    page.force_login(setup.experimenter)
    html = page.get(f"/experiments/{experiment.pk}/").content.decode()
    assert f'action="/experiments/{experiment.pk}/follow-up/"' in html
    assert "Measure this schedule in a follow-up experiment" in html
    # the live block (htmx replaces the verdicts with it while runs land) keeps the button
    live = page.get(f"/experiments/{experiment.pk}/live/").content.decode()
    assert "Measure this schedule in a follow-up experiment" in live
    answer = page.post(
        f"/experiments/{experiment.pk}/follow-up/", {"arm": "eagle3", "workload": "chat"}
    )
    assert answer.status_code == 302
    follow_up = Experiment.objects.order_by("-pk").first()
    assert follow_up is not None
    assert answer["Location"] == f"/experiments/{follow_up.pk}/"
    # a viewer sees the advice but no button
    viewer = Client()
    viewer.force_login(setup.viewer)
    assert (
        "Measure this schedule" not in viewer.get(f"/experiments/{experiment.pk}/").content.decode()
    )
