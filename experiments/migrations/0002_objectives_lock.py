"""The database refuses edits to a started experiment's objectives and definition (both vendors).

Once ``locked_at`` is set, an UPDATE that changes the objectives, their hash, the lock time or the
matrix (workloads, loads, repetitions, policies) is refused, and arms can no longer be added or
changed. PostgreSQL: a PL/pgSQL BEFORE UPDATE trigger; SQLite: BEFORE UPDATE/INSERT triggers.
"""

from django.db import migrations

EXPERIMENT = "experiments_experiment"
ARM = "experiments_arm"
LOCKED_COLUMNS = (
    "objectives",
    "objectives_hash",
    "locked_at",
    "workloads",
    "loads",
    "repetitions",
    "warmup_requests",
    "cache_policy",
    "failure_policy",
    "max_failed_runs",
)
MESSAGE = "experiment objectives are locked: a started experiment cannot be edited"
ARM_MESSAGE = "experiment is locked: its arms cannot change"

POSTGRES_FORWARD = f"""
CREATE OR REPLACE FUNCTION experiments_experiment_lock_guard() RETURNS trigger AS $$
BEGIN
    IF OLD.locked_at IS NOT NULL AND ({" OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in LOCKED_COLUMNS)}) THEN
        RAISE EXCEPTION '{MESSAGE} (id %)', OLD.id USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER experiments_experiment_lock_guard
    BEFORE UPDATE ON {EXPERIMENT}
    FOR EACH ROW EXECUTE FUNCTION experiments_experiment_lock_guard();

CREATE OR REPLACE FUNCTION experiments_arm_lock_guard() RETURNS trigger AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM {EXPERIMENT} e WHERE e.id = NEW.experiment_id AND e.locked_at IS NOT NULL)
       OR (TG_OP = 'UPDATE' AND EXISTS (
            SELECT 1 FROM {EXPERIMENT} e WHERE e.id = OLD.experiment_id AND e.locked_at IS NOT NULL)) THEN
        RAISE EXCEPTION '{ARM_MESSAGE}' USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER experiments_arm_lock_guard
    BEFORE INSERT OR UPDATE ON {ARM}
    FOR EACH ROW EXECUTE FUNCTION experiments_arm_lock_guard();
"""
POSTGRES_BACKWARD = f"""
DROP TRIGGER IF EXISTS experiments_arm_lock_guard ON {ARM};
DROP FUNCTION IF EXISTS experiments_arm_lock_guard();
DROP TRIGGER IF EXISTS experiments_experiment_lock_guard ON {EXPERIMENT};
DROP FUNCTION IF EXISTS experiments_experiment_lock_guard();
"""
SQLITE_FORWARD = [
    f"""
CREATE TRIGGER experiments_experiment_lock_guard
BEFORE UPDATE ON {EXPERIMENT}
FOR EACH ROW WHEN OLD.locked_at IS NOT NULL AND ({" OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in LOCKED_COLUMNS)})
BEGIN
    SELECT RAISE(ABORT, '{MESSAGE}');
END;
""",
    f"""
CREATE TRIGGER experiments_arm_lock_guard_insert
BEFORE INSERT ON {ARM}
FOR EACH ROW WHEN (SELECT locked_at FROM {EXPERIMENT} WHERE id = NEW.experiment_id) IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, '{ARM_MESSAGE}');
END;
""",
    f"""
CREATE TRIGGER experiments_arm_lock_guard_update
BEFORE UPDATE ON {ARM}
FOR EACH ROW WHEN (SELECT locked_at FROM {EXPERIMENT} WHERE id = OLD.experiment_id) IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, '{ARM_MESSAGE}');
END;
""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS experiments_arm_lock_guard_update;",
    "DROP TRIGGER IF EXISTS experiments_arm_lock_guard_insert;",
    "DROP TRIGGER IF EXISTS experiments_experiment_lock_guard;",
]


def _run(schema_editor, statements):
    vendor = schema_editor.connection.vendor
    if vendor not in statements:
        raise RuntimeError(f"no objectives lock for database vendor {vendor!r}")
    sql = statements[vendor]
    for statement in [sql] if isinstance(sql, str) else sql:
        schema_editor.execute(statement, params=None)


def forward(apps, schema_editor):
    _run(schema_editor, {"postgresql": POSTGRES_FORWARD, "sqlite": SQLITE_FORWARD})


def backward(apps, schema_editor):
    _run(schema_editor, {"postgresql": POSTGRES_BACKWARD, "sqlite": SQLITE_BACKWARD})


class Migration(migrations.Migration):
    dependencies = [("experiments", "0001_initial")]

    operations = [migrations.RunPython(forward, backward)]
