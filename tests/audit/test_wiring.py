"""Every action by a user or token on configurations, experiments, objectives, hosts, host tokens,
roles and API tokens writes its audit event (who, before/after); agents' heartbeats write none."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from accounts import roles
from accounts.models import ApiToken
from accounts.services import api_token_rotate, user_create_or_update
from audit.models import AuditEvent
from audit.selectors import events_for
from configurations.models import FrozenConfiguration
from experiments.models import Experiment
from experiments.services import experiment_cancel, experiment_create, experiment_start
from hosts.models import GpuHost
from tests.configurations.factories import document
from tests.fixtures import Setup, agent_as, api_as, client_for, create_kwargs

pytestmark = pytest.mark.django_db


def _actions(obj: Any) -> list[tuple[str, str, str]]:
    return list(events_for(obj).order_by("seq").values_list("action", "actor_kind", "actor_name"))


def test_configurations_over_the_api(setup: Setup) -> None:
    api = api_as(setup.experimenter)
    created = api.post(
        "/api/v1/configurations/",
        {"document": document(proposal__num_speculative_tokens=2), "name": "k2"},
        format="json",
        HTTP_X_REQUEST_ID="ci-42",
    )
    assert created.status_code == 201, created.json()
    config = FrozenConfiguration.objects.get(pk=created.json()["configuration"]["id"])
    api.patch(f"/api/v1/configurations/{config.pk}/", {"name": "eagle3 k2"}, format="json")
    assert _actions(config) == [
        ("configuration.create", "token", "alice"),
        ("configuration.update", "token", "alice"),
    ]
    create, update = events_for(config).order_by("seq")
    assert create.request_id == "ci-42"
    assert (create.after or {})["config_hash"] == config.config_hash
    assert ((update.before or {})["name"], (update.after or {})["name"]) == ("k2", "eagle3 k2")
    # storing the same content again changes nothing and records nothing
    before = AuditEvent.objects.count()
    api.post(
        "/api/v1/configurations/",
        {"document": document(proposal__num_speculative_tokens=2)},
        format="json",
    )
    assert AuditEvent.objects.count() == before
    pk = config.pk
    assert api.delete(f"/api/v1/configurations/{pk}/").status_code == 204
    deleted = AuditEvent.objects.get(action="configuration.delete")
    assert (deleted.object_id, (deleted.before or {})["name"]) == (str(pk), "eagle3 k2")


def test_experiments_and_the_objectives_lock(setup: Setup) -> None:
    experiment = experiment_create(**create_kwargs(setup))
    experiment_start(experiment=experiment)
    experiment_cancel(experiment=Experiment.objects.get(pk=experiment.pk))
    actions = [a for a, _, _ in _actions(experiment)]
    assert actions == [
        "experiment.create",
        "experiment.plan",
        "experiment.start",
        "objectives.lock",
        "experiment.cancel",
    ]
    lock = events_for(experiment).get(action="objectives.lock")
    experiment.refresh_from_db()
    assert (lock.after or {})["objectives_hash"] == experiment.objectives_hash
    assert events_for(experiment).get(action="experiment.create").actor_name == "alice"


def test_hosts_host_tokens_and_that_heartbeats_are_not_audited(setup: Setup) -> None:
    operator = client_for(roles.OPERATOR)
    created = operator.post(
        "/api/v1/hosts/",
        {"name": "gpu-c", "mode": "managed", "gpu_model": "H100", "gpu_count": 8,
         "engines": {"vllm": ["0.30.0"]}},
        format="json",
    )  # fmt: skip
    assert created.status_code == 201, created.json()
    host = GpuHost.objects.get(name="gpu-c")
    operator.patch("/api/v1/hosts/gpu-c/", {"gpu_count": 4}, format="json")
    issued = operator.post("/api/v1/hosts/gpu-c/token/", {}, format="json")
    token = issued.json()["token"]
    beats = AuditEvent.objects.count()
    agent_as(token).post(
        "/api/v1/agent/heartbeat", {"inventory": {"engines": {"vllm": ["0.30.0"]}}}, format="json"
    )
    assert AuditEvent.objects.count() == beats  # an agent's heartbeat is not an audited action
    operator.delete("/api/v1/hosts/gpu-c/token/")
    assert [a for a, _, _ in _actions(host)] == [
        "host.register",
        "host.update",
        "host_token.issue",
        "host_token.revoke",
    ]
    update = events_for(host).get(action="host.update")
    assert ((update.before or {})["gpu_count"], (update.after or {})["gpu_count"]) == (8, 4)
    for event in events_for(host):
        text = str(event.before) + str(event.after)
        assert token not in text
        assert "token_hash" not in text
    assert events_for(host).get(action="host_token.issue").actor_kind == "token"


def test_role_changes_and_api_tokens(setup: Setup) -> None:
    user = user_create_or_update(username="ruth", password=None, role_names=[roles.VIEWER])
    user_create_or_update(username="ruth", password=None, role_names=[roles.VIEWER])  # no change
    user_create_or_update(username="ruth", password=None, role_names=[roles.MANAGER])
    assert [a for a, _, _ in _actions(user)] == ["user.create", "roles.change"]
    change = events_for(user).get(action="roles.change")
    assert ((change.before or {})["roles"], (change.after or {})["roles"]) == (
        ["viewer"],
        ["manager"],
    )
    key = api_token_rotate(user=user)
    token = ApiToken.objects.get(user=user)
    create = events_for(token).get(action="api_token.create")
    assert key not in str(create.after)
    assert token.token_hash not in str(create.after)
    assert copy.deepcopy(create.after or {})["user"] == "ruth"
    assert (create.after or {})["prefix"] == token.prefix
