from __future__ import annotations

import pytest
from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from experiments.models import Experiment

pytestmark = pytest.mark.django_db(databases=["default", "sqlite"])


def _locked(alias: str) -> Experiment:
    return Experiment.objects.using(alias).create(
        name="locked",
        workloads=[{"name": "chat"}],
        loads=[{"name": "c1"}],
        objectives={"schema": 1, "objectives": []},
        objectives_hash="a" * 64,
        locked_at=timezone.now(),
        status=Experiment.Status.RUNNING,
    )


@pytest.mark.parametrize("alias", ["default", "sqlite"])
@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("objectives", "'{}'"),
        ("objectives_hash", "'b'"),
        ("locked_at", "NULL"),
        ("repetitions", "9"),
        ("loads", "'[]'"),
    ],
)
def test_the_database_refuses_edits_to_a_locked_experiment(
    alias: str, column: str, value: str
) -> None:
    experiment = _locked(alias)
    with (
        pytest.raises(DatabaseError, match="locked"),
        transaction.atomic(using=alias),
        connections[alias].cursor() as cursor,
    ):
        cursor.execute(
            f"UPDATE experiments_experiment SET {column} = {value} WHERE id = %s",
            [experiment.pk],
        )


@pytest.mark.parametrize("alias", ["default", "sqlite"])
def test_a_locked_experiment_may_still_change_status_and_name(alias: str) -> None:
    experiment = _locked(alias)
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "UPDATE experiments_experiment SET status = 'done', name = 'renamed' WHERE id = %s",
            [experiment.pk],
        )
    assert Experiment.objects.using(alias).get(pk=experiment.pk).status == "done"


# --- a locked experiment's hosts and arms, and the experiment itself (issue 15, finding 10) ------


def _locked_with_arm_and_host(alias: str) -> tuple[Experiment, int, int]:
    """A locked experiment with one arm and one host, and a spare host and configuration."""
    from configurations.models import FrozenConfiguration
    from experiments.models import Arm
    from hosts.models import GpuHost
    from specportal.engines.document import prepare
    from tests.configurations.factories import VLLM_EAGLE3, document

    configs = []
    for doc in (VLLM_EAGLE3, document(proposal__num_speculative_tokens=2)):
        normalised, ident = prepare(doc)
        configs.append(
            FrozenConfiguration.objects.using(alias).get_or_create(
                config_hash=ident.config_hash,
                defaults={
                    "target_hash": ident.target_hash,
                    "proposal_hash": ident.proposal_hash,
                    "engine": "vllm",
                    "method": ident.method,
                    "document": normalised,
                },
            )[0]
        )
    hosts = [GpuHost.objects.using(alias).get_or_create(name=f"gpu-{n}")[0] for n in ("a", "b")]
    experiment = Experiment.objects.using(alias).create(
        name="draft", workloads=[{"name": "chat"}], loads=[{"name": "c1"}], objectives={}
    )
    experiment.hosts.add(hosts[0])
    Arm.objects.using(alias).create(
        experiment=experiment, position=0, label="baseline", configuration=configs[0]
    )
    Experiment.objects.using(alias).filter(pk=experiment.pk).update(
        objectives_hash="a" * 64, locked_at=timezone.now(), status=Experiment.Status.RUNNING
    )
    return experiment, hosts[1].pk, configs[1].pk


LOCKED_STATEMENTS = {
    "add-a-host": "INSERT INTO experiments_experiment_hosts (experiment_id, gpuhost_id) "
    "VALUES ({experiment}, {spare_host})",
    "remove-the-host": "DELETE FROM experiments_experiment_hosts WHERE experiment_id = {experiment}",
    "swap-the-host": "UPDATE experiments_experiment_hosts SET gpuhost_id = {spare_host} "
    "WHERE experiment_id = {experiment}",
    "add-an-arm": "INSERT INTO experiments_arm (experiment_id, position, label, configuration_id) "
    "VALUES ({experiment}, 1, 'sneaked', {spare_config})",
    "swap-the-arm-configuration": "UPDATE experiments_arm SET configuration_id = {spare_config} "
    "WHERE experiment_id = {experiment}",
    "remove-the-arm": "DELETE FROM experiments_arm WHERE experiment_id = {experiment}",
    "delete-the-experiment": "DELETE FROM experiments_experiment WHERE id = {experiment}",
}


@pytest.mark.parametrize("alias", ["default", "sqlite"])
@pytest.mark.parametrize("attempt", sorted(LOCKED_STATEMENTS))
def test_the_database_refuses_changes_to_a_locked_experiments_hosts_and_arms(
    alias: str, attempt: str
) -> None:
    experiment, spare_host, spare_config = _locked_with_arm_and_host(alias)
    statement = LOCKED_STATEMENTS[attempt].format(
        experiment=experiment.pk, spare_host=spare_host, spare_config=spare_config
    )
    with (
        pytest.raises(DatabaseError, match="locked"),
        transaction.atomic(using=alias),
        connections[alias].cursor() as cursor,
    ):
        cursor.execute(statement)
    stored = Experiment.objects.using(alias).get(pk=experiment.pk)
    assert [h.name for h in stored.hosts.all()] == ["gpu-a"]
    assert [(a.label, a.configuration_id) for a in stored.arms.all()] == [
        ("baseline", stored.arms.get().configuration_id)
    ]
    assert stored.arms.get().configuration_id != spare_config


@pytest.mark.parametrize("alias", ["default", "sqlite"])
def test_an_arm_cannot_be_moved_into_a_locked_experiment(alias: str) -> None:
    from experiments.models import Arm

    experiment, _, spare_config = _locked_with_arm_and_host(alias)
    draft = Experiment.objects.using(alias).create(
        name="another draft", workloads=[], loads=[], objectives={}
    )
    arm = Arm.objects.using(alias).create(
        experiment=draft, position=3, label="mover", configuration_id=spare_config
    )
    with (
        pytest.raises(DatabaseError, match="locked"),
        transaction.atomic(using=alias),
        connections[alias].cursor() as cursor,
    ):
        cursor.execute(
            "UPDATE experiments_arm SET experiment_id = %s WHERE id = %s", [experiment.pk, arm.pk]
        )


@pytest.mark.parametrize("alias", ["default", "sqlite"])
def test_a_draft_experiments_hosts_and_arms_may_still_change(alias: str) -> None:
    from experiments.models import Arm

    _, spare_host, spare_config = _locked_with_arm_and_host(alias)
    draft = Experiment.objects.using(alias).create(name="d", workloads=[], loads=[], objectives={})
    draft.hosts.add(spare_host)
    draft.hosts.remove(spare_host)
    arm = Arm.objects.using(alias).create(
        experiment=draft, position=0, label="x", configuration_id=spare_config
    )
    arm.delete()
    draft.delete()
    assert not Experiment.objects.using(alias).filter(pk=draft.pk).exists()
