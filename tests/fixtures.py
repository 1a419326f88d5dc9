"""Shared test data (registered in ``tests/conftest.py``): personas, clients, a two-host setup.

The ``setup`` fixture (two emulated hosts, three vLLM arms, objectives) serves the experiments,
runs and hosts tests and the real-engine ones; ``client_for`` / ``assert_role_matrix`` the APIs'
permission tests.
"""

from __future__ import annotations

import copy
import gzip
import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from accounts import roles
from accounts.services import api_token_rotate, user_create_or_update
from configurations.models import FrozenConfiguration
from configurations.services import configuration_create
from experiments.services import experiment_advance
from hosts.models import GpuHost
from hosts.services import host_heartbeat_record, host_register, host_token_issue
from runs import services as run_services
from runs.ingest import upload_ingest
from tests.specportal.emulator.harness import start_emulator

__all__ = ["start_emulator"]  # the emulator fixture, for tests that measure runs for real

REVISION = "0e9e39f249a16976918f6564b8830bc894c89659"
BASELINE: dict[str, Any] = {
    "schema": 1,
    "engine": "vllm",
    "engine_build": {"version": "0.30.0"},
    "target": {"model": "meta-llama/Llama-3.1-8B-Instruct", "revision": REVISION},
    "proposal": {},
    "sampling": {"temperature": 0, "seed": 0},
}
NGRAM = {
    **BASELINE,
    "proposal": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4},
}
EAGLE = {
    **BASELINE,
    "proposal": {
        "method": "eagle3",
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "revision": "9a4bc3e1b4c1a5e6b1b3a0c2f0e4d5c6b7a8e9f0",
        "num_speculative_tokens": 3,
    },
}
OBJECTIVES: dict[str, Any] = {
    "schema": 1,
    "objectives": [
        {"metric": "ttft_ms", "statistic": "p99", "op": "<=", "threshold": 500, "loads": ["c1"]},
        {
            "metric": "output_throughput",
            "statistic": "value",
            "op": ">=",
            "threshold": 1.05,
            "scope": "relative",
        },
    ],
}
WORKLOADS = [
    {"name": "chat", "dataset_name": "bundled", "category": "chat", "output_len": 32},
    {"name": "code", "dataset_name": "bundled", "category": "code", "output_len": 32},
]
LOADS = [
    {"name": "c1", "concurrency": 1, "requests": 4},
    {"name": "c8", "concurrency": 8, "requests": 16},
]


@dataclass
class Setup:
    baseline: FrozenConfiguration
    ngram: FrozenConfiguration
    eagle: FrozenConfiguration
    hosts: list[GpuHost]
    tokens: dict[str, str]
    experimenter: User
    viewer: User


def register_host(name: str, **fields: Any) -> tuple[GpuHost, str]:
    defaults: dict[str, Any] = {
        "mode": GpuHost.Mode.MANAGED,
        "emulated": True,
        "gpu_model": "emulated-H100",
        "gpu_count": 1,
        "engines": {"vllm": ["0.30.0"]},
    }
    host = host_register(name=name, **{**defaults, **fields})
    token = host_token_issue(host=host)
    host_heartbeat_record(host=host)
    host.refresh_from_db()
    return host, token


@pytest.fixture
def setup(db: None) -> Setup:
    # Transactional tests flush the tables, data migrations included: recreate the role groups.
    for role in roles.ALL_ROLES:
        Group.objects.get_or_create(name=role)
    baseline, _ = configuration_create(document=copy.deepcopy(BASELINE), name="baseline")
    ngram, _ = configuration_create(document=copy.deepcopy(NGRAM), name="ngram")
    eagle, _ = configuration_create(document=copy.deepcopy(EAGLE), name="eagle3")
    h1, t1 = register_host("gpu-a")
    h2, t2 = register_host("gpu-b")
    experimenter = user_create_or_update(
        username="alice", password=None, role_names=[roles.EXPERIMENTER]
    )
    viewer = user_create_or_update(username="victor", password=None, role_names=[roles.VIEWER])
    return Setup(baseline, ngram, eagle, [h1, h2], {"gpu-a": t1, "gpu-b": t2}, experimenter, viewer)


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, str]]:
    """The runs' doorbells, recorded instead of published: tests check the database. Ingestion
    is not queued either; a test ingests by calling the task or the service itself."""
    sent: list[tuple[int, int, str]] = []
    monkeypatch.setattr(
        "runs.dispatch.publish",
        lambda *, run_id, attempt, host: sent.append((run_id, attempt, host)),
    )
    monkeypatch.setattr("runs.dispatch.ingest", lambda *, upload_id: None)
    return sent


def seeds_story_body(s: Setup) -> dict[str, Any]:
    """An experiment's creation request over the API: three arms on two hosts, the seeds' story."""
    return {
        "name": "seeds story",
        "baseline": s.baseline.pk,
        "candidates": [s.ngram.pk, s.eagle.pk],
        "labels": ["baseline", "ngram", "eagle3"],
        "workloads": WORKLOADS,
        "loads": LOADS,
        "objectives": OBJECTIVES,
        "hosts": ["gpu-a", "gpu-b"],
        "repetitions": 2,
    }


def api_as(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_rotate(user=user)}")
    return client


def agent_as(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Host {token}")
    return client


def create_kwargs(s: Setup, **changes: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "user": s.experimenter,
        "name": "ngram vs eagle",
        "baseline": s.baseline,
        "candidates": [s.ngram, s.eagle],
        "labels": ["baseline", "ngram", "eagle3"],
        "workloads": copy.deepcopy(WORKLOADS),
        "loads": copy.deepcopy(LOADS),
        "objectives": copy.deepcopy(OBJECTIVES),
        "hosts": s.hosts,
        "repetitions": 2,
    }
    kwargs.update(changes)
    return kwargs


def client_for(*role_names: str) -> APIClient:
    """An API client holding a token of a user with exactly these roles (none: no role)."""
    user = user_create_or_update(
        username="-".join(role_names) or "nobody", password=None, role_names=role_names
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_rotate(user=user)}")
    return client


# The role just below each role: it must be refused where that role is needed.
WRONG_ROLE = {
    roles.VIEWER: None,
    roles.EXPERIMENTER: roles.VIEWER,
    roles.OPERATOR: roles.EXPERIMENTER,
}


def _call(client: APIClient, method: str, url: str, body: dict[str, Any] | None) -> Any:
    return getattr(client, method)(url, data=body, format="json")


def assert_role_matrix(method: str, url: str, body: dict[str, Any] | None, role: str) -> None:
    """401 without credentials, 403 without a role or with the role below, 2xx with ``role``."""
    anonymous = _call(APIClient(), method, url, body)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "not_authenticated"
    no_role = _call(client_for(), method, url, body)
    assert no_role.status_code == 403
    assert no_role.json()["error"]["code"] == "permission_denied"
    wrong = WRONG_ROLE[role]
    if wrong is not None:
        assert _call(client_for(wrong), method, url, body).status_code == 403
    allowed = _call(client_for(role), method, url, body)
    assert 200 <= allowed.status_code < 300, allowed.content


def finish_run(run: Any, document: dict[str, Any]) -> None:
    """Play the agent for one queued run: claim it, upload ``document`` (a result file as the load
    generator writes it) through the portal's receipt, ingest it and advance the experiment."""
    run_services.run_claim(host=run.host, run_id=run.pk, attempt=run.attempt)
    envelope = {"schema": 1, "run": run.pk, "attempt": run.attempt, "outcome": "done",
                "error": None, "engine": {}, "result": document}  # fmt: skip
    upload = run_services.run_result_receive(
        host=run.host, run_id=run.pk, attempt=run.attempt,
        body=gzip.compress(json.dumps(envelope).encode()),
    )  # fmt: skip
    upload_ingest(upload_id=upload.pk)
    experiment_advance(experiment_id=run.experiment_id)
