"""The approvals REST API: the same role checks and answers as the services, in the one error
shape, in the OpenAPI schema, so CI can open a change request from a KEEP experiment."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts import roles
from approvals.models import ChangeRequest
from tests.approvals.helpers import (
    ALL_KEEP,
    finished_experiment,
    person,
    real_host,
    verdict_document,
    verdicts,
)
from tests.fixtures import LOADS, OBJECTIVES, WORKLOADS, Setup, api_as

__all__ = ["verdicts"]
pytestmark = pytest.mark.django_db


@pytest.fixture
def api(setup: Setup, verdicts: dict[int, Any]) -> dict[str, Any]:
    mia = person("mia", roles.MANAGER)
    experiment = finished_experiment(setup, hosts=[real_host()])
    verdicts[experiment.pk] = verdict_document(experiment, ALL_KEEP)
    return {
        "experiment": experiment,
        "manager": api_as(mia),
        "experimenter": api_as(setup.experimenter),
        "operator": api_as(person("otto", roles.OPERATOR)),
        "viewer": api_as(setup.viewer),
    }


def _deployment_body(s: Setup, **changes: Any) -> dict[str, Any]:
    body = {
        "name": "chat-prod",
        "owner_team": "serving",
        "configuration": s.baseline.pk,
        "workloads": copy.deepcopy(WORKLOADS),
        "loads": copy.deepcopy(LOADS),
        "objectives": copy.deepcopy(OBJECTIVES),
    }
    body.update(changes)
    return body


def _error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content[:400]
    body: dict[str, Any] = response.json()
    assert set(body["error"]) == {"code", "message", "fields"}
    assert body["error"]["code"] == code, body
    error: dict[str, Any] = body["error"]
    return error


def test_ci_opens_a_change_request_and_a_manager_approves_it_over_rest(
    setup: Setup, api: dict[str, Any]
) -> None:
    _error(
        api["experimenter"].post("/api/v1/deployments/", _deployment_body(setup), format="json"),
        403,
        "permission_denied",
    )
    created = api["manager"].post("/api/v1/deployments/", _deployment_body(setup), format="json")
    assert created.status_code == 201, created.json()
    deployment = created.json()
    assert deployment["configuration"]["config_hash"] == setup.baseline.config_hash
    assert deployment["launch_command"]["argv"][:2] == ["vllm", "serve"]
    assert [w["name"] for w in deployment["workloads"]] == ["chat", "code"]
    assert deployment["workloads"][0]["schema_version"] == 1  # normalised documents
    # CI (an experimenter's token) opens the request in one call
    opened = api["experimenter"].post(
        "/api/v1/change-requests/",
        {"deployment": "chat-prod", "to_configuration": setup.ngram.pk, "reason": "KEEP in CI",
         "evidence": [api["experiment"].pk], "open": True},
        format="json",
    )  # fmt: skip
    assert opened.status_code == 201, opened.json()
    body = opened.json()
    assert body["state"] == "open"
    assert body["evidence_check"]["passed"] is True
    assert sorted(d["path"] for d in body["diff"]) == ["/proposal/method", "/proposal/num_speculative_tokens", "/proposal/prompt_lookup_max"]  # fmt: skip
    cr_id = body["id"]
    listed = api["viewer"].get("/api/v1/change-requests/?deployment=chat-prod&state=open").json()
    assert [r["id"] for r in listed] == [cr_id]
    _error(api["viewer"].get("/api/v1/change-requests/?stat=open"), 400, "invalid")
    # the author cannot approve (no manager role); an operator cannot either
    _error(api["experimenter"].post(f"/api/v1/change-requests/{cr_id}/approve/", {}, format="json"), 403, "permission_denied")  # fmt: skip
    approved = api["manager"].post(f"/api/v1/change-requests/{cr_id}/approve/", {}, format="json")
    assert approved.status_code == 200, approved.json()
    assert (approved.json()["state"], approved.json()["decided_by"]) == ("approved", "mia")
    # deciding twice: a clear 409
    again = _error(api["manager"].post(f"/api/v1/change-requests/{cr_id}/reject/", {"note": "x"}, format="json"), 409, "illegal_transition")  # fmt: skip
    assert "is approved: it cannot reject" in again["message"]
    applied = api["operator"].post(f"/api/v1/change-requests/{cr_id}/apply/", {}, format="json")
    assert applied.json()["state"] == "applied"
    history = api["viewer"].get("/api/v1/deployments/chat-prod/history/").json()
    assert [p["configuration"]["config_hash"] for p in history] == [setup.ngram.config_hash, setup.baseline.config_hash]  # fmt: skip
    assert history[0]["approved_by"] == "mia"
    as_of = api["viewer"].get("/api/v1/deployments/chat-prod/history/", {"as_of": history[1]["started_at"]}).json()  # fmt: skip
    assert [p["configuration"]["config_hash"] for p in as_of] == [setup.baseline.config_hash]
    _error(
        api["viewer"].get("/api/v1/deployments/chat-prod/history/?as_of=yesterday"), 400, "invalid"
    )
    # the manager's audit view sees it all, with the token as actor
    events = api["manager"].get("/api/v1/audit/events/", {"object_type": "approvals.changerequest"}).json()  # fmt: skip
    approve = next(e for e in events if e["action"] == "change_request.approve")
    assert (approve["actor_kind"], approve["actor_name"]) == ("token", "mia")
    _error(api["experimenter"].get("/api/v1/audit/events/"), 403, "permission_denied")


def test_insufficient_evidence_over_rest_needs_a_justification(
    setup: Setup, api: dict[str, Any], verdicts: dict[int, Any]
) -> None:
    experiment = api["experiment"]
    verdicts[experiment.pk] = verdict_document(experiment, {**ALL_KEEP, ("chat", "c8"): "DROP"})
    api["manager"].post("/api/v1/deployments/", _deployment_body(setup), format="json")
    cr = api["experimenter"].post(
        "/api/v1/change-requests/",
        {"deployment": "chat-prod", "to_configuration": setup.ngram.pk, "reason": "r",
         "evidence": [experiment.pk], "open": True},
        format="json",
    ).json()  # fmt: skip
    assert cr["evidence_check"]["passed"] is False
    url = f"/api/v1/change-requests/{cr['id']}/approve/"
    error = _error(api["manager"].post(url, {}, format="json"), 409, "evidence_insufficient")
    assert error["fields"] == {"justification": ["required when the evidence rules fail"]}
    _error(api["manager"].post(url, {"justification": 3}, format="json"), 400, "invalid")
    _error(api["manager"].post(url, {"justificaton": "x"}, format="json"), 400, "invalid")
    ok = api["manager"].post(url, {"justification": "c8 is not our traffic"}, format="json").json()
    assert (ok["state"], ok["against_evidence"]) == ("approved", True)


def test_missing_evidence_and_bad_input_change_nothing(setup: Setup, api: dict[str, Any]) -> None:
    api["manager"].post("/api/v1/deployments/", _deployment_body(setup), format="json")
    _error(
        api["experimenter"].post(
            "/api/v1/change-requests/",
            {"deployment": "chat-prod", "to_configuration": setup.ngram.pk, "reason": "r",
             "evidence": [], "open": True},
            format="json",
        ),
        409, "missing_evidence",
    )  # fmt: skip
    error = _error(
        api["experimenter"].post(
            "/api/v1/change-requests/",
            {"deployment": "nowhere", "to_configuration": setup.ngram.pk, "reason": "r", "evidence": []},
            format="json",
        ),
        400, "invalid",
    )  # fmt: skip
    assert "deployment" in error["fields"]
    assert not ChangeRequest.objects.exists()
    bad = _error(api["manager"].post("/api/v1/deployments/", _deployment_body(setup, name="x", loads=[{"name": "c1", "concurency": 1}]), format="json"), 400, "invalid")  # fmt: skip
    assert "loads.0.concurency" in bad["fields"]


def test_the_schema_documents_every_approvals_endpoint(setup: Setup) -> None:
    schema = api_as(setup.viewer).get("/api/v1/schema/?format=json").json()
    for path in (
        "/api/v1/deployments/",
        "/api/v1/deployments/{name}/history/",
        "/api/v1/change-requests/",
        "/api/v1/change-requests/{change_request_id}/approve/",
        "/api/v1/change-requests/{change_request_id}/apply/",
        "/api/v1/audit/events/",
    ):
        assert path in schema["paths"], path
    approve = schema["paths"]["/api/v1/change-requests/{change_request_id}/approve/"]["post"]
    assert approve["operationId"] == "change_requests_approve"


def test_anonymous_is_401(setup: Setup) -> None:
    response = APIClient().get("/api/v1/deployments/")
    assert response.status_code == 401
