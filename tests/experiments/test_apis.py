from __future__ import annotations

from typing import Any

import pytest

from experiments.models import Experiment
from tests.fixtures import (
    Setup,
    api_as,
    seeds_story_body,
)

# Every test here records the doorbells instead of ringing them (tests/fixtures.py).
pytestmark = pytest.mark.usefixtures("published")


def test_experiment_api_creates_plans_and_starts(
    setup: Setup, django_capture_on_commit_callbacks: Any
) -> None:
    api = api_as(setup.experimenter)
    created = api.post("/api/v1/experiments/", seeds_story_body(setup), format="json")
    assert created.status_code == 201
    experiment_id = created.json()["id"]
    plan = api.post(f"/api/v1/experiments/{experiment_id}/plan/").json()
    assert len(plan["runs"]) == 24
    assert plan["estimated_seconds"] > 0
    assert [r["arm"] for r in plan["runs"][:3]] == ["baseline", "ngram", "eagle3"]
    with django_capture_on_commit_callbacks(execute=True):
        started = api.post(f"/api/v1/experiments/{experiment_id}/start/", {}, format="json")
    assert started.json()["status"] == "running"
    assert len(started.json()["objectives_hash"]) == 64
    # editing after start is refused
    again = api.post(f"/api/v1/experiments/{experiment_id}/plan/")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "locked"


def test_experiment_api_roles_and_error_shape(setup: Setup) -> None:
    anonymous = api_as(setup.viewer)
    anonymous.credentials()
    assert anonymous.get("/api/v1/experiments/").status_code == 401
    viewer = api_as(setup.viewer)
    assert viewer.get("/api/v1/experiments/").status_code == 200
    refused = viewer.post("/api/v1/experiments/", seeds_story_body(setup), format="json")
    assert refused.status_code == 403
    bad = api_as(setup.experimenter).post(
        "/api/v1/experiments/",
        {**seeds_story_body(setup), "loads": [{"name": "c8", "concurrency": 8}]},
        format="json",
    )
    assert bad.status_code == 400
    assert set(bad.json()["error"]["fields"]) >= {"loads", "loads.0"}


def test_creating_an_experiment_with_a_misspelt_key_is_refused_with_a_suggestion(
    setup: Setup,
) -> None:
    body = seeds_story_body(setup)
    body["nmae"] = body.pop("name")
    refused = api_as(setup.experimenter).post("/api/v1/experiments/", body, format="json")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "invalid"
    assert "did you mean 'name'?" in error["fields"]["nmae"][0]
    assert not Experiment.objects.exists()


def test_starting_with_an_unknown_key_is_refused(setup: Setup) -> None:
    api = api_as(setup.experimenter)
    experiment_id = api.post("/api/v1/experiments/", seeds_story_body(setup), format="json").json()[
        "id"
    ]
    refused = api.post(
        f"/api/v1/experiments/{experiment_id}/start/",
        {"lint_overide_reason": "known"},
        format="json",
    )
    assert refused.status_code == 400
    assert (
        "did you mean 'lint_override_reason'?"
        in (refused.json()["error"]["fields"]["lint_overide_reason"][0])
    )
    assert Experiment.objects.get(pk=experiment_id).status == Experiment.Status.DRAFT
