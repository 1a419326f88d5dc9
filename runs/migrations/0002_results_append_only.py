"""Run results are append-only once ingested (issue 15, finding 10), on both vendors.

* ``runs_requestrecord``: never updated; inserted only while its run has no ingested result
  (the ingestion's own COPY comes before the run's ``result_attempt`` is set, in the same
  transaction); deleted only while its run has none.
* ``runs_run``: once ``result_attempt`` is set, what was measured and what the run was
  (summary, figures, engine report, status, attempt, cell, arm, host) never changes, and the run
  cannot be deleted.
* ``runs_resultupload``: the stored upload never changes what it is (run, attempt, hash) and the
  upload of an ingested result cannot be deleted.

PostgreSQL checks the per-request table with statement-level triggers over transition tables, so
the COPY of 100,000 rows pays one check, not 100,000. The tables' owner (only) may switch the
guards off with ``SET LOCAL specportal.identity_guard = 'off'``.
"""

from django.db import migrations

RUN = "runs_run"
RECORD = "runs_requestrecord"
UPLOAD = "runs_resultupload"
RESULT_COLUMNS = (
    "experiment_id",
    "arm_id",
    "host_id",
    "sequence",
    "workload",
    "load",
    "repetition",
    "status",
    "attempt",
    "started_at",
    "finished_at",
    "engine_report",
    "engine_checked",
    "mismatches",
    "engine_env",
    "command",
    "log_excerpt",
    "summary",
    "server",
    "acceptance",
    "prefix_cache_hit_fraction",
    "prefix_cache",
    "result_attempt",
    "result_schema",
    "requests_total",
    "requests_failed",
)
UPLOAD_COLUMNS = ("run_id", "attempt", "sha256", "received_at")
RUN_MESSAGE = "run results are append-only: an ingested run cannot change"
RUN_DELETE_MESSAGE = "run results are append-only: an ingested run cannot be deleted"
RECORD_MESSAGE = "request records are append-only: they cannot be changed"
RECORD_INGESTED_MESSAGE = "request records are append-only: their run is already ingested"
UPLOAD_MESSAGE = "result uploads are append-only: a stored upload cannot change"
UPLOAD_DELETE_MESSAGE = "result uploads are append-only: an ingested upload cannot be deleted"
GUARD_OFF = (
    "coalesce(current_setting('specportal.identity_guard', true), '') = 'off' AND "
    "pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'USAGE')"
)

POSTGRES_FORWARD = f"""
CREATE OR REPLACE FUNCTION runs_run_results_guard() RETURNS trigger AS $$
BEGIN
    IF {GUARD_OFF} THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    IF TG_OP = 'DELETE' THEN
        IF OLD.result_attempt IS NOT NULL THEN
            RAISE EXCEPTION '{RUN_DELETE_MESSAGE} (id %)', OLD.id
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN OLD;
    END IF;
    IF OLD.result_attempt IS NOT NULL AND ({" OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in RESULT_COLUMNS)}) THEN
        RAISE EXCEPTION '{RUN_MESSAGE} (id %)', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER runs_run_results_guard
    BEFORE UPDATE OR DELETE ON {RUN}
    FOR EACH ROW EXECUTE FUNCTION runs_run_results_guard();

CREATE OR REPLACE FUNCTION runs_requestrecord_update_guard() RETURNS trigger AS $$
BEGIN
    IF {GUARD_OFF} THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION '{RECORD_MESSAGE}' USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER runs_requestrecord_update_guard
    BEFORE UPDATE ON {RECORD}
    FOR EACH ROW EXECUTE FUNCTION runs_requestrecord_update_guard();

CREATE OR REPLACE FUNCTION runs_requestrecord_ingested_guard() RETURNS trigger AS $$
BEGIN
    IF {GUARD_OFF} THEN
        RETURN NULL;
    END IF;
    -- changed_rows: the rows this statement inserted (or deleted), however many.
    PERFORM 1 FROM {RUN} r WHERE r.result_attempt IS NOT NULL
        AND r.id IN (SELECT DISTINCT run_id FROM changed_rows);
    IF FOUND THEN
        RAISE EXCEPTION '{RECORD_INGESTED_MESSAGE}' USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER runs_requestrecord_insert_guard
    AFTER INSERT ON {RECORD}
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION runs_requestrecord_ingested_guard();
CREATE TRIGGER runs_requestrecord_delete_guard
    AFTER DELETE ON {RECORD}
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION runs_requestrecord_ingested_guard();

CREATE OR REPLACE FUNCTION runs_resultupload_guard() RETURNS trigger AS $$
BEGIN
    IF {GUARD_OFF} THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT 1 FROM {RUN} r WHERE r.id = OLD.run_id AND r.result_attempt = OLD.attempt)
        THEN
            RAISE EXCEPTION '{UPLOAD_DELETE_MESSAGE} (id %)', OLD.id
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN OLD;
    END IF;
    IF {" OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in UPLOAD_COLUMNS)} THEN
        RAISE EXCEPTION '{UPLOAD_MESSAGE} (id %)', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER runs_resultupload_guard
    BEFORE UPDATE OR DELETE ON {UPLOAD}
    FOR EACH ROW EXECUTE FUNCTION runs_resultupload_guard();
"""
POSTGRES_BACKWARD = f"""
DROP TRIGGER IF EXISTS runs_resultupload_guard ON {UPLOAD};
DROP FUNCTION IF EXISTS runs_resultupload_guard();
DROP TRIGGER IF EXISTS runs_requestrecord_delete_guard ON {RECORD};
DROP TRIGGER IF EXISTS runs_requestrecord_insert_guard ON {RECORD};
DROP FUNCTION IF EXISTS runs_requestrecord_ingested_guard();
DROP TRIGGER IF EXISTS runs_requestrecord_update_guard ON {RECORD};
DROP FUNCTION IF EXISTS runs_requestrecord_update_guard();
DROP TRIGGER IF EXISTS runs_run_results_guard ON {RUN};
DROP FUNCTION IF EXISTS runs_run_results_guard();
"""


def _ingested(column):
    return f"(SELECT result_attempt FROM {RUN} WHERE id = {column}) IS NOT NULL"


SQLITE_FORWARD = [
    f"""
CREATE TRIGGER runs_run_results_guard
BEFORE UPDATE ON {RUN}
FOR EACH ROW WHEN OLD.result_attempt IS NOT NULL AND ({" OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in RESULT_COLUMNS)})
BEGIN
    SELECT RAISE(ABORT, '{RUN_MESSAGE}');
END;
""",
    f"""
CREATE TRIGGER runs_run_delete_guard
BEFORE DELETE ON {RUN}
FOR EACH ROW WHEN OLD.result_attempt IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, '{RUN_DELETE_MESSAGE}');
END;
""",
    f"""
CREATE TRIGGER runs_requestrecord_update_guard
BEFORE UPDATE ON {RECORD}
BEGIN
    SELECT RAISE(ABORT, '{RECORD_MESSAGE}');
END;
""",
    f"""
CREATE TRIGGER runs_requestrecord_insert_guard
BEFORE INSERT ON {RECORD}
FOR EACH ROW WHEN {_ingested("NEW.run_id")}
BEGIN
    SELECT RAISE(ABORT, '{RECORD_INGESTED_MESSAGE}');
END;
""",
    f"""
CREATE TRIGGER runs_requestrecord_delete_guard
BEFORE DELETE ON {RECORD}
FOR EACH ROW WHEN {_ingested("OLD.run_id")}
BEGIN
    SELECT RAISE(ABORT, '{RECORD_INGESTED_MESSAGE}');
END;
""",
    f"""
CREATE TRIGGER runs_resultupload_update_guard
BEFORE UPDATE ON {UPLOAD}
FOR EACH ROW WHEN {" OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in UPLOAD_COLUMNS)}
BEGIN
    SELECT RAISE(ABORT, '{UPLOAD_MESSAGE}');
END;
""",
    f"""
CREATE TRIGGER runs_resultupload_delete_guard
BEFORE DELETE ON {UPLOAD}
FOR EACH ROW WHEN (SELECT result_attempt FROM {RUN} WHERE id = OLD.run_id) = OLD.attempt
BEGIN
    SELECT RAISE(ABORT, '{UPLOAD_DELETE_MESSAGE}');
END;
""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS runs_resultupload_delete_guard;",
    "DROP TRIGGER IF EXISTS runs_resultupload_update_guard;",
    "DROP TRIGGER IF EXISTS runs_requestrecord_delete_guard;",
    "DROP TRIGGER IF EXISTS runs_requestrecord_insert_guard;",
    "DROP TRIGGER IF EXISTS runs_requestrecord_update_guard;",
    "DROP TRIGGER IF EXISTS runs_run_delete_guard;",
    "DROP TRIGGER IF EXISTS runs_run_results_guard;",
]


def _run(schema_editor, statements):
    vendor = schema_editor.connection.vendor
    if vendor not in statements:
        raise RuntimeError(f"no results guard for database vendor {vendor!r}")
    sql = statements[vendor]
    for statement in [sql] if isinstance(sql, str) else sql:
        schema_editor.execute(statement, params=None)


def guards_forward(apps, schema_editor):
    _run(schema_editor, {"postgresql": POSTGRES_FORWARD, "sqlite": SQLITE_FORWARD})


def guards_backward(apps, schema_editor):
    _run(schema_editor, {"postgresql": POSTGRES_BACKWARD, "sqlite": SQLITE_BACKWARD})


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(guards_forward, guards_backward),
    ]
