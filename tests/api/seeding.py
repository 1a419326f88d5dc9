"""One object of every kind the API names, for the tests that walk the whole schema."""

from __future__ import annotations

import copy
from typing import Any

from django.test import override_settings

from accounts import roles
from accounts.services import api_token_rotate, user_create_or_update
from approvals.services import change_request_create, deployment_create
from experiments.services import experiment_create, experiment_start
from notifications.services import webhook_create
from tests.fixtures import LOADS, OBJECTIVES, WORKLOADS, Setup, create_kwargs, register_host


def seed_every_kind(setup: Setup) -> dict[str, Any]:
    """Objects of every kind, and credentials: a user with every role, an agent's host token."""
    user = user_create_or_update(username="fuzzer", password=None, role_names=roles.ALL_ROLES)
    experiment = experiment_create(**create_kwargs(setup, user=user, hosts=[setup.hosts[0]]))
    experiment = experiment_start(experiment=experiment)
    draft = experiment_create(**create_kwargs(setup, user=user, name="draft"))
    deployment = deployment_create(
        user=user,
        name="chat-prod",
        owner_team="serving",
        configuration=setup.baseline,
        workloads=copy.deepcopy(WORKLOADS),
        loads=copy.deepcopy(LOADS),
        objectives=copy.deepcopy(OBJECTIVES),
    )
    change = change_request_create(
        user=user,
        deployment=deployment,
        to_configuration=setup.ngram,
        reason="ngram wins on chat",
        evidence=[experiment],
    )
    with override_settings(SPECPORTAL_WEBHOOKS_ALLOW_PRIVATE=True):  # no DNS in tests
        webhook, _ = webhook_create(owner=user, url="http://127.0.0.1:9/h", events=["run.failed"])
    spare, _ = register_host("fuzz-spare")
    return {
        "user_token": api_token_rotate(user=user),
        "host_token": setup.tokens["gpu-a"],
        "ids": {
            "run_id": list(experiment.runs.values_list("pk", flat=True)[:20]),
            "experiment_id": [experiment.pk, draft.pk],
            "config_id": [setup.baseline.pk, setup.ngram.pk, setup.eagle.pk],
            "change_request_id": [change.pk],
            "webhook_id": [webhook.pk],
        },
        "names": [setup.hosts[0].name, setup.hosts[1].name, deployment.name, spare.name],
        "spare": spare.name,
    }
