"""``Idempotency-Key`` on writes: a retried create answers the first result and creates nothing."""

from __future__ import annotations

import copy
from typing import Any

from experiments.models import Experiment
from tests.fixtures import LOADS, OBJECTIVES, WORKLOADS, Setup, api_as


def _body(setup: Setup, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "retried",
        "baseline": setup.baseline.pk,
        "candidates": [setup.ngram.pk],
        "workloads": copy.deepcopy(WORKLOADS),
        "loads": copy.deepcopy(LOADS),
        "objectives": copy.deepcopy(OBJECTIVES),
        "hosts": ["gpu-a"],
        "repetitions": 2,
    }
    body.update(changes)
    return body


def test_same_key_and_body_answer_the_first_result(setup: Setup) -> None:
    api = api_as(setup.experimenter)
    first = api.post("/api/v1/experiments/", _body(setup), format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert first.status_code == 201
    again = api.post("/api/v1/experiments/", _body(setup), format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Experiment.objects.count() == 1


def test_same_key_with_another_body_is_a_409(setup: Setup) -> None:
    api = api_as(setup.experimenter)
    api.post("/api/v1/experiments/", _body(setup), format="json", HTTP_IDEMPOTENCY_KEY="k2")
    other = api.post("/api/v1/experiments/", _body(setup, name="other"), format="json",
                     HTTP_IDEMPOTENCY_KEY="k2")  # fmt: skip
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert "Idempotency-Key" in other.json()["error"]["fields"]
    assert Experiment.objects.count() == 1


def test_keys_belong_to_their_user_and_no_key_means_no_replay(setup: Setup) -> None:
    from accounts import roles
    from accounts.services import user_create_or_update

    bob = user_create_or_update(username="bob", password=None, role_names=[roles.EXPERIMENTER])
    alice_api, bob_api = api_as(setup.experimenter), api_as(bob)
    assert alice_api.post("/api/v1/experiments/", _body(setup), format="json",
                          HTTP_IDEMPOTENCY_KEY="shared").status_code == 201  # fmt: skip
    assert bob_api.post("/api/v1/experiments/", _body(setup), format="json",
                        HTTP_IDEMPOTENCY_KEY="shared").status_code == 201  # fmt: skip
    assert alice_api.post("/api/v1/experiments/", _body(setup), format="json").status_code == 201
    assert Experiment.objects.count() == 3


def test_a_refused_write_is_not_remembered(setup: Setup) -> None:
    api = api_as(setup.experimenter)
    bad = api.post("/api/v1/experiments/", _body(setup, repetitions=0), format="json",
                   HTTP_IDEMPOTENCY_KEY="k3")  # fmt: skip
    assert bad.status_code == 400
    good = api.post("/api/v1/experiments/", _body(setup, repetitions=0), format="json",
                    HTTP_IDEMPOTENCY_KEY="k3")  # fmt: skip
    assert good.status_code == 400  # validated again, not replayed as if stored
    assert "Idempotent-Replayed" not in good


def test_the_header_is_in_the_schema(setup: Setup) -> None:
    schema = api_as(setup.viewer).get("/api/v1/schema/?format=json").json()
    create = schema["paths"]["/api/v1/experiments/"]["post"]
    assert any(p["name"] == "Idempotency-Key" and p["in"] == "header" for p in create["parameters"])
    assert "summary" in create or "operationId" in create
