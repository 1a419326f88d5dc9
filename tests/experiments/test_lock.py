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
