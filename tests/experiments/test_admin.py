from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import User
from django.db.models import Model
from django.test import Client
from django.utils import timezone

from experiments.models import Arm, Experiment, ExperimentFigures
from runs.models import RequestRecord, ResultUpload, ResultUploadPart, Run, RunFigures
from tests.fixtures import LOADS, OBJECTIVES, WORKLOADS, Setup

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client() -> Client:
    User.objects.create_superuser("admin", password="a-long-password-1")
    client = Client()
    client.login(username="admin", password="a-long-password-1")
    return client


def _experiment(setup: Setup, *, name: str) -> Experiment:
    experiment = Experiment.objects.create(
        name=name, workloads=WORKLOADS, loads=LOADS, objectives=OBJECTIVES
    )
    experiment.hosts.set(setup.hosts)
    return experiment


def _lock(experiment: Experiment) -> None:
    # As experiment_start does (after which the database refuses arm and objective changes).
    Experiment.objects.filter(pk=experiment.pk).update(
        objectives_hash="a" * 64, locked_at=timezone.now(), status=Experiment.Status.RUNNING
    )
    experiment.refresh_from_db()


@pytest.fixture
def records(setup: Setup) -> dict[type[Model], Model]:
    _experiment(setup, name="draft")
    experiment = _experiment(setup, name="locked")
    arm = Arm.objects.create(
        experiment=experiment, position=0, label="baseline", configuration=setup.baseline
    )
    _lock(experiment)
    run = Run.objects.create(
        experiment=experiment,
        arm=arm,
        host=setup.hosts[0],
        sequence=1,
        workload="chat",
        load="c1",
        repetition=1,
        position=1,
        estimated_seconds=1.0,
        status=Run.Status.DONE,
        summary={"ttft_ms": {"p50": 12.0}},
    )
    record = RequestRecord.objects.create(
        run=run, index=0, chunk_times=[0.1, 0.2], chunk_tokens=[1, 1], success=True
    )
    upload = ResultUpload.objects.create(run=run, attempt=1, sha256="b" * 64, size=20)
    part = ResultUploadPart.objects.create(upload=upload, number=0, data=b"\x1f\x8b" * 10)
    figures = ExperimentFigures.objects.create(
        experiment=experiment, section="cell:chat/c1", version="v1", figures_gzip=b"\x1f\x8b"
    )
    run_figures = RunFigures.objects.create(run=run, result_attempt=1, data={"ecdf": {}})
    return {
        RunFigures: run_figures,
        Experiment: experiment,
        ExperimentFigures: figures,
        Arm: arm,
        Run: run,
        RequestRecord: record,
        ResultUpload: upload,
        ResultUploadPart: part,
    }


# An experiment's runs are shown beside it: the runs app's models are checked here too.
APPS = ("experiments", "runs")


def test_every_experiments_and_runs_model_has_an_admin() -> None:
    for label in APPS:
        models = set(apps.get_app_config(label).get_models())
        assert models <= set(admin.site._registry), label


def test_each_changelist_and_change_page_answers_200_for_a_superuser(
    admin_client: Client, records: dict[type[Model], Model]
) -> None:
    models = [model for label in APPS for model in apps.get_app_config(label).get_models()]
    for model in models:
        base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        assert admin_client.get(base).status_code == 200, base
        obj = records[model]
        page = admin_client.get(f"{base}{obj.pk}/change/")
        assert page.status_code == 200, model
        assert str(obj) in page.content.decode() or model is RequestRecord


def test_a_locked_experiments_plan_and_objectives_are_read_only_in_the_admin(
    admin_client: Client, records: dict[type[Model], Model]
) -> None:
    draft = Experiment.objects.get(name="draft")
    draft_form = admin_client.get(f"/admin/experiments/experiment/{draft.pk}/change/")
    assert 'name="objectives"' in draft_form.content.decode()
    locked = records[Experiment]
    locked_form = admin_client.get(f"/admin/experiments/experiment/{locked.pk}/change/")
    html = locked_form.content.decode()
    assert 'name="name"' in html  # still editable, as the database allows
    for field in ("objectives", "loads", "workloads", "repetitions", "objectives_hash"):
        assert f'name="{field}"' not in html, field


def test_measured_results_cannot_be_changed_added_or_deleted_in_the_admin(
    admin_client: Client, records: dict[type[Model], Model]
) -> None:
    for model in (Run, RequestRecord, ResultUpload, ResultUploadPart):
        obj = records[model]
        base = f"/admin/runs/{model._meta.model_name}/"
        page = admin_client.get(f"{base}{obj.pk}/change/").content.decode()
        assert 'type="submit"' not in page.split('id="content-main"')[1], model
        assert admin_client.get(f"{base}add/").status_code == 403
        assert admin_client.post(f"{base}{obj.pk}/delete/", {"post": "yes"}).status_code == 403
        assert model.objects.filter(pk=obj.pk).exists()
    run = records[Run]
    assert isinstance(run, Run)
    admin_client.post(f"/admin/runs/run/{run.pk}/change/", {"status": "failed"})
    run.refresh_from_db()
    assert run.status == Run.Status.DONE


def test_a_locked_experiment_cannot_be_deleted_in_the_admin(
    admin_client: Client, records: dict[type[Model], Model]
) -> None:
    # The database refuses it (its arms and hosts are locked): the admin does not offer it.
    locked = records[Experiment]
    url = f"/admin/experiments/experiment/{locked.pk}/delete/"
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    changelist = admin_client.get("/admin/experiments/experiment/").content.decode()
    assert "delete_selected" not in changelist
    assert Experiment.objects.filter(pk=locked.pk).exists()
    draft = Experiment.objects.get(name="draft")
    assert (
        admin_client.post(
            f"/admin/experiments/experiment/{draft.pk}/delete/", {"post": "yes"}
        ).status_code
        == 302
    )
    assert not Experiment.objects.filter(pk=draft.pk).exists()
