"""The database refuses UPDATEs that change a frozen configuration's identity (both vendors).

PostgreSQL: a PL/pgSQL BEFORE UPDATE trigger; a data migration that really must rewrite identity
runs ``SET LOCAL specportal.identity_guard = 'off'`` first (explicit, per transaction).
SQLite: a BEFORE UPDATE trigger that aborts (no session settings exist there: drop and re-create
the trigger in such a migration).
"""

from django.db import migrations

TABLE = "runs_frozenconfiguration"
COLUMNS = (
    "config_hash",
    "target_hash",
    "proposal_hash",
    "engine",
    "method",
    "document",
    "created_by_id",
    "created_at",
)
MESSAGE = "frozen configuration is immutable: identity columns cannot change"

POSTGRES_FORWARD = f"""
CREATE OR REPLACE FUNCTION runs_frozenconfiguration_identity_guard() RETURNS trigger AS $$
BEGIN
    IF coalesce(current_setting('specportal.identity_guard', true), '') = 'off' THEN
        RETURN NEW;
    END IF;
    IF {" OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in COLUMNS)} THEN
        RAISE EXCEPTION '{MESSAGE} (id %)', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER runs_frozenconfiguration_identity_guard
    BEFORE UPDATE ON {TABLE}
    FOR EACH ROW EXECUTE FUNCTION runs_frozenconfiguration_identity_guard();
"""
POSTGRES_BACKWARD = f"""
DROP TRIGGER IF EXISTS runs_frozenconfiguration_identity_guard ON {TABLE};
DROP FUNCTION IF EXISTS runs_frozenconfiguration_identity_guard();
"""
SQLITE_FORWARD = f"""
CREATE TRIGGER runs_frozenconfiguration_identity_guard
BEFORE UPDATE ON {TABLE}
FOR EACH ROW WHEN {" OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in COLUMNS)}
BEGIN
    SELECT RAISE(ABORT, '{MESSAGE}');
END;
"""
SQLITE_BACKWARD = "DROP TRIGGER IF EXISTS runs_frozenconfiguration_identity_guard;"


def _run(schema_editor, sql_by_vendor):
    sql = sql_by_vendor.get(schema_editor.connection.vendor)
    if sql is None:
        raise RuntimeError(
            f"no identity guard for database vendor {schema_editor.connection.vendor!r}"
        )
    schema_editor.execute(sql, params=None)


def forward(apps, schema_editor):
    _run(schema_editor, {"postgresql": POSTGRES_FORWARD, "sqlite": SQLITE_FORWARD})


def backward(apps, schema_editor):
    _run(schema_editor, {"postgresql": POSTGRES_BACKWARD, "sqlite": SQLITE_BACKWARD})


class Migration(migrations.Migration):
    dependencies = [("runs", "0001_configurations_and_hosts")]
    operations = [migrations.RunPython(forward, backward)]
