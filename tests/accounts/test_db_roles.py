"""The production role setup (``manage.py db_roles``), tested with a real second PostgreSQL role:
the web process's role reads and writes rows but cannot switch off, disable, drop or replace
any database guard, and every raw-SQL gap of issue 15's finding 10 stays closed for it."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from configurations.models import FrozenConfiguration
from configurations.services import configuration_create
from runs.models import Run
from tests.configurations.factories import VLLM_EAGLE3, document
from tests.configurations.test_configurations import raw_insert, raw_insert_values
from tests.experiments.test_lock import _locked_with_arm_and_host
from tests.runs.test_results_guard import _run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def web_role() -> Iterator[str]:
    """A role named for this test database (roles are cluster-wide; colleagues share it)."""
    name = f"{connection.settings_dict['NAME']}_web"[:63]
    out = io.StringIO()
    call_command("db_roles", "--app-role", name, stdout=out)
    assert "owns none" in out.getvalue()
    yield name
    quoted = connection.ops.quote_name(name)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP OWNED BY {quoted}")
        cursor.execute(f"DROP ROLE {quoted}")


def connect_as(role: str) -> psycopg.Connection[Any]:
    db = connection.settings_dict
    return psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        dbname=db["NAME"],
        user=role,
        autocommit=True,
    )


def test_the_web_role_reads_and_writes_rows_without_owning_a_table(web_role: str) -> None:
    config, _ = configuration_create(document=VLLM_EAGLE3, name="eagle3")
    with connect_as(web_role) as web:
        assert web.execute("SELECT current_user").fetchone() == (web_role,)
        names = web.execute("SELECT name FROM configurations_frozenconfiguration").fetchall()
        assert names == [("eagle3",)]
        web.execute(
            "UPDATE configurations_frozenconfiguration SET name = 'renamed' WHERE id = %s",
            [config.pk],
        )
        with web.cursor() as cursor:
            raw_insert(cursor, raw_insert_values(document(proposal__num_speculative_tokens=2)))
        owned = web.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND pg_has_role(current_user, c.relowner, 'USAGE')"
        ).fetchone()
        assert owned == (0,)
    assert FrozenConfiguration.objects.get(pk=config.pk).name == "renamed"
    assert FrozenConfiguration.objects.count() == 2


GUARD_ESCAPES = {
    "disable-all-triggers": "ALTER TABLE configurations_frozenconfiguration DISABLE TRIGGER ALL",
    "disable-the-identity-trigger": "ALTER TABLE configurations_frozenconfiguration "
    "DISABLE TRIGGER configurations_frozenconfiguration_identity_guard",
    "drop-the-insert-trigger": "DROP TRIGGER configurations_frozenconfiguration_insert_guard "
    "ON configurations_frozenconfiguration",
    "drop-the-lock-function": "DROP FUNCTION experiments_arm_lock_guard() CASCADE",
    "replace-the-guard-function": "CREATE OR REPLACE FUNCTION runs_run_results_guard() "
    "RETURNS trigger AS $$ BEGIN RETURN NEW; END $$ LANGUAGE plpgsql",
    "replica-mode-skips-triggers": "SET session_replication_role = replica",
    "truncate-skips-row-triggers": "TRUNCATE runs_requestrecord",
    "take-ownership": "ALTER TABLE runs_run OWNER TO CURRENT_USER",
    "drop-the-tombstones": "DROP TABLE configurations_configurationtombstone",
    "add-a-trigger": "CREATE TRIGGER sneaky BEFORE UPDATE ON runs_run FOR EACH ROW "
    "EXECUTE FUNCTION suppress_redundant_updates_trigger()",
    "create-a-table": "CREATE TABLE sneaky (id int)",
}


@pytest.mark.parametrize("attempt", sorted(GUARD_ESCAPES))
def test_the_web_role_cannot_disable_drop_or_replace_a_guard(web_role: str, attempt: str) -> None:
    with (
        connect_as(web_role) as web,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        web.execute(GUARD_ESCAPES[attempt])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_trigger WHERE tgname LIKE %s AND tgenabled = 'O'",
            ["%_guard%"],
        )
        assert cursor.fetchone()[0] >= 10


def test_the_guard_switch_works_for_the_owner_only(web_role: str) -> None:
    config, _ = configuration_create(document=VLLM_EAGLE3)
    with connect_as(web_role) as web, web.transaction():
        web.execute("SET LOCAL specportal.identity_guard = 'off'")
        with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="immutable"):
            web.execute(
                "UPDATE configurations_frozenconfiguration SET method = 'ngram' WHERE id = %s",
                [config.pk],
            )
    assert FrozenConfiguration.objects.get(pk=config.pk).method == "eagle3"


def _attempt(web: psycopg.Connection[Any], statement: str, params: Any = None) -> str:
    with pytest.raises(psycopg.errors.IntegrityConstraintViolation) as refused:
        web.execute(statement, params)
    return str(refused.value)


def test_the_raw_sql_gaps_of_finding_10_stay_closed_for_the_web_role(web_role: str) -> None:
    # 1. delete-and-reinsert an unreferenced configuration under the same id, another document
    config, _ = configuration_create(document=document(proposal__num_speculative_tokens=4))
    experiment, spare_host, _ = _locked_with_arm_and_host("default")
    done = _run("default", ingested=True)
    other = raw_insert_values(document(proposal__num_speculative_tokens=3), id=config.pk)
    with connect_as(web_role) as web:
        web.execute("DELETE FROM configurations_frozenconfiguration WHERE id = %s", [config.pk])
        with (
            pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="deleted"),
            web.cursor() as cursor,
        ):
            raw_insert(cursor, other)
        # 2. an INSERT whose hashes do not match its document
        with (
            pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="does not match"),
            web.cursor() as cursor,
        ):
            raw_insert(cursor, raw_insert_values(VLLM_EAGLE3, config_hash="0" * 64))
        # 3. a locked experiment's hosts and arms
        assert "locked" in _attempt(
            web,
            "INSERT INTO experiments_experiment_hosts (experiment_id, gpuhost_id) VALUES (%s, %s)",
            [experiment.pk, spare_host],
        )
        assert "locked" in _attempt(
            web, "DELETE FROM experiments_arm WHERE experiment_id = %s", [experiment.pk]
        )
        # 4. a done run's summary and its records
        assert "append-only" in _attempt(
            web, "UPDATE runs_run SET summary = '{}' WHERE id = %s", [done.pk]
        )
        assert "append-only" in _attempt(
            web, "DELETE FROM runs_requestrecord WHERE run_id = %s", [done.pk]
        )
        assert "append-only" in _attempt(
            web, "DELETE FROM configurations_configurationtombstone WHERE id = %s", [config.pk]
        )
    assert not FrozenConfiguration.objects.filter(pk=config.pk).exists()
    assert Run.objects.get(pk=done.pk).summary == {"completed": 2, "ttft_ms_p99": 40.0}
    assert experiment.hosts.count() == 1


def test_db_roles_prints_its_sql_and_refuses_to_demote_the_owner() -> None:
    out = io.StringIO()
    call_command("db_roles", "--app-role", "specportal_web", "--print", stdout=out)
    sql = out.getvalue()
    assert 'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "public"' in sql
    assert "TRUNCATE" not in sql
    assert "TRIGGER" not in sql
    owner = connection.settings_dict["USER"] or "postgres"
    with pytest.raises(CommandError, match="owns the tables"):
        call_command("db_roles", "--app-role", owner)
    with pytest.raises(CommandError, match="not set"):
        call_command("db_roles", "--app-role", "x_web", "--password-env", "NO_SUCH_VARIABLE_SET")
