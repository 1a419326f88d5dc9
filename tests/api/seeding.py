"""One object of every kind the API names, for the tests that walk the whole schema."""

from __future__ import annotations

import copy
from typing import Any

from django.test import override_settings

from accounts import roles
from accounts.services import api_token_rotate, user_create_or_update
from approvals.services import change_request_create, deployment_create
from experiments.models import Experiment
from experiments.services import experiment_create, experiment_start
from notifications.services import webhook_create
from runs.models import Run
from tests.fixtures import (
    LOADS,
    OBJECTIVES,
    WORKLOADS,
    Setup,
    create_kwargs,
    finish_run,
    register_host,
)
from tests.specportal.cli.results import result
from verdicts.services import verdict_recompute


def seed_every_kind(setup: Setup) -> dict[str, Any]:
    """Objects of every kind, and credentials: a user with every role, an agent's host token."""
    user = user_create_or_update(username="fuzzer", password=None, role_names=roles.ALL_ROLES)
    experiment = experiment_create(**create_kwargs(setup, user=user, hosts=[setup.hosts[0]]))
    experiment = experiment_start(experiment=experiment)
    draft = experiment_create(**create_kwargs(setup, user=user, name="draft"))
    decided = _decided(setup, user)
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
            "experiment_id": [experiment.pk, draft.pk, decided.pk],
            "config_id": [setup.baseline.pk, setup.ngram.pk, setup.eagle.pk],
            "change_request_id": [change.pk],
            "webhook_id": [webhook.pk],
        },
        "names": [setup.hosts[0].name, setup.hosts[1].name, deployment.name, spare.name],
        "spare": spare.name,
    }


def _decided(setup: Setup, user: Any) -> Experiment:
    """An experiment measured to the end, with a stored verdict: the verdict endpoints (and the
    follow-up experiment they offer) are fuzzed with something to serve."""
    kwargs = create_kwargs(setup, user=user, name="decided", candidates=[setup.eagle],
                           labels=["baseline", "eagle3"], hosts=[setup.hosts[0]], repetitions=3)  # fmt: skip
    kwargs["workloads"] = kwargs["workloads"][:1]
    kwargs["loads"] = kwargs["loads"][:1]
    experiment = experiment_start(experiment=experiment_create(**kwargs))
    while run := Run.objects.filter(experiment=experiment, status=Run.Status.QUEUED).first():
        tpot = 0.006 if run.arm.label == "eagle3" else 0.01
        finish_run(run, result(tpot=tpot, seed=run.pk).to_dict())
    verdict = verdict_recompute(experiment_id=experiment.pk)
    assert verdict is not None, "the seeded experiment has no verdict"
    return experiment
