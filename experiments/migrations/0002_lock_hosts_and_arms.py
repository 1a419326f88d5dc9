"""A locked experiment's hosts and arms are guarded like its objectives (issue 15, finding 10).

Once ``locked_at`` is set: no arm is added, changed or removed, no host is added, changed or
removed (the ``experiments_experiment_hosts`` link table), and the experiment row itself cannot be
deleted; on both vendors. PostgreSQL: the tables' owner (only) may switch the guards off for a
data migration with ``SET LOCAL specportal.identity_guard = 'off'``; the web process's role does
not own the tables (``manage.py db_roles``), so it can neither do that nor disable the triggers.
"""

from django.db import migrations

EXPERIMENT = "experiments_experiment"
ARM = "experiments_arm"
HOSTS = "experiments_experiment_hosts"
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
HOSTS_MESSAGE = "experiment is locked: its hosts cannot change"
DELETE_MESSAGE = "experiment is locked: a started experiment cannot be deleted"
GUARD_OFF = (
    "coalesce(current_setting('specportal.identity_guard', true), '') = 'off' AND "
    "pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'USAGE')"
)


def _locked(column):
    return f"EXISTS (SELECT 1 FROM {EXPERIMENT} e WHERE e.id = {column} AND e.locked_at IS NOT NULL)"


POSTGRES_FORWARD = f"""
CREATE OR REPLACE FUNCTION experiments_experiment_lock_guard() RETURNS trigger AS $$
BEGIN
    IF {GUARD_OFF} THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    IF TG_OP = 'DELETE' THEN
        IF OLD.locked_at IS NOT NULL THEN
            RAISE EXCEPTION '{DELETE_MESSAGE} (id %)', OLD.id
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN OLD;
    END IF;
    IF OLD.locked_at IS NOT NULL AND ({" OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in LOCKED_COLUMNS)}) THEN
        RAISE EXCEPTION '{MESSAGE} (id %)', OLD.id USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS experiments_experiment_lock_guard ON {EXPERIMENT};
CREATE TRIGGER experiments_experiment_lock_guard
    BEFORE UPDATE OR DELETE ON {EXPERIMENT}
    FOR EACH ROW EXECUTE FUNCTION experiments_experiment_lock_guard();

CREATE OR REPLACE FUNCTION experiments_arm_lock_guard() RETURNS trigger AS $$
BEGIN
    IF {GUARD_OFF} THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    IF (TG_OP <> 'DELETE' AND {_locked("NEW.experiment_id")})
       OR (TG_OP <> 'INSERT' AND {_locked("OLD.experiment_id")}) THEN
        RAISE EXCEPTION '{ARM_MESSAGE}' USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS experiments_arm_lock_guard ON {ARM};
CREATE TRIGGER experiments_arm_lock_guard
    BEFORE INSERT OR UPDATE OR DELETE ON {ARM}
    FOR EACH ROW EXECUTE FUNCTION experiments_arm_lock_guard();

CREATE OR REPLACE FUNCTION experiments_experiment_hosts_lock_guard() RETURNS trigger AS $$
BEGIN
    IF {GUARD_OFF} THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    IF (TG_OP <> 'DELETE' AND {_locked("NEW.experiment_id")})
       OR (TG_OP <> 'INSERT' AND {_locked("OLD.experiment_id")}) THEN
        RAISE EXCEPTION '{HOSTS_MESSAGE}' USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER experiments_experiment_hosts_lock_guard
    BEFORE INSERT OR UPDATE OR DELETE ON {HOSTS}
    FOR EACH ROW EXECUTE FUNCTION experiments_experiment_hosts_lock_guard();
"""
POSTGRES_BACKWARD = f"""
DROP TRIGGER IF EXISTS experiments_experiment_hosts_lock_guard ON {HOSTS};
DROP FUNCTION IF EXISTS experiments_experiment_hosts_lock_guard();
CREATE OR REPLACE FUNCTION experiments_arm_lock_guard() RETURNS trigger AS $$
BEGIN
    IF {_locked("NEW.experiment_id")}
       OR (TG_OP = 'UPDATE' AND {_locked("OLD.experiment_id")}) THEN
        RAISE EXCEPTION '{ARM_MESSAGE}' USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS experiments_arm_lock_guard ON {ARM};
CREATE TRIGGER experiments_arm_lock_guard
    BEFORE INSERT OR UPDATE ON {ARM}
    FOR EACH ROW EXECUTE FUNCTION experiments_arm_lock_guard();
CREATE OR REPLACE FUNCTION experiments_experiment_lock_guard() RETURNS trigger AS $$
BEGIN
    IF OLD.locked_at IS NOT NULL AND ({" OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in LOCKED_COLUMNS)}) THEN
        RAISE EXCEPTION '{MESSAGE} (id %)', OLD.id USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS experiments_experiment_lock_guard ON {EXPERIMENT};
CREATE TRIGGER experiments_experiment_lock_guard
    BEFORE UPDATE ON {EXPERIMENT}
    FOR EACH ROW EXECUTE FUNCTION experiments_experiment_lock_guard();
"""


def _sqlite_locked(column):
    return f"(SELECT locked_at FROM {EXPERIMENT} WHERE id = {column}) IS NOT NULL"


SQLITE_FORWARD = [
    f"""
CREATE TRIGGER experiments_experiment_delete_guard
BEFORE DELETE ON {EXPERIMENT}
FOR EACH ROW WHEN OLD.locked_at IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, '{DELETE_MESSAGE}');
END;
""",
    f"""
CREATE TRIGGER experiments_arm_lock_guard_delete
BEFORE DELETE ON {ARM}
FOR EACH ROW WHEN {_sqlite_locked("OLD.experiment_id")}
BEGIN
    SELECT RAISE(ABORT, '{ARM_MESSAGE}');
END;
""",
    f"""
CREATE TRIGGER experiments_experiment_hosts_lock_guard_insert
BEFORE INSERT ON {HOSTS}
FOR EACH ROW WHEN {_sqlite_locked("NEW.experiment_id")}
BEGIN
    SELECT RAISE(ABORT, '{HOSTS_MESSAGE}');
END;
""",
    f"""
CREATE TRIGGER experiments_experiment_hosts_lock_guard_update
BEFORE UPDATE ON {HOSTS}
FOR EACH ROW WHEN {_sqlite_locked("OLD.experiment_id")} OR {_sqlite_locked("NEW.experiment_id")}
BEGIN
    SELECT RAISE(ABORT, '{HOSTS_MESSAGE}');
END;
""",
    f"""
CREATE TRIGGER experiments_experiment_hosts_lock_guard_delete
BEFORE DELETE ON {HOSTS}
FOR EACH ROW WHEN {_sqlite_locked("OLD.experiment_id")}
BEGIN
    SELECT RAISE(ABORT, '{HOSTS_MESSAGE}');
END;
""",
    # An arm moved into a locked experiment by UPDATE (the 0001 trigger looks at OLD only).
    f"""
CREATE TRIGGER experiments_arm_lock_guard_update_new
BEFORE UPDATE ON {ARM}
FOR EACH ROW WHEN {_sqlite_locked("NEW.experiment_id")}
BEGIN
    SELECT RAISE(ABORT, '{ARM_MESSAGE}');
END;
""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS experiments_arm_lock_guard_update_new;",
    "DROP TRIGGER IF EXISTS experiments_experiment_hosts_lock_guard_delete;",
    "DROP TRIGGER IF EXISTS experiments_experiment_hosts_lock_guard_update;",
    "DROP TRIGGER IF EXISTS experiments_experiment_hosts_lock_guard_insert;",
    "DROP TRIGGER IF EXISTS experiments_arm_lock_guard_delete;",
    "DROP TRIGGER IF EXISTS experiments_experiment_delete_guard;",
]


def _run(schema_editor, statements):
    vendor = schema_editor.connection.vendor
    if vendor not in statements:
        raise RuntimeError(f"no experiment lock for database vendor {vendor!r}")
    sql = statements[vendor]
    for statement in [sql] if isinstance(sql, str) else sql:
        schema_editor.execute(statement, params=None)


def lock_guard_forward(apps, schema_editor):
    _run(schema_editor, {"postgresql": POSTGRES_FORWARD, "sqlite": SQLITE_FORWARD})


def lock_guard_backward(apps, schema_editor):
    _run(schema_editor, {"postgresql": POSTGRES_BACKWARD, "sqlite": SQLITE_BACKWARD})


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(lock_guard_forward, lock_guard_backward),
    ]
