"""The pieces of a stored result upload are append-only too, on both vendors (issue 15, finding 10).

``ResultUploadPart`` (0007) holds an upload's body; 0002's guards covered the upload's row (run,
attempt, hash) but not its bytes. Now:

* a piece is never updated (the body as received is what the hash was taken of);
* a piece is neither added to nor deleted from an upload whose run has ingested it (the run's
  ``result_attempt`` is the upload's attempt). While it is not ingested, the receipt writes its
  pieces and a refused or replaced attempt's upload may be removed, as before.

The tables' owner (only) may switch the guard off with ``SET LOCAL specportal.identity_guard =
'off'``, as for 0002's guards.
"""

import importlib

from django.db import migrations

_GUARDS = importlib.import_module("runs.migrations.0002_results_append_only")
PART = "runs_resultuploadpart"
UPLOAD = _GUARDS.UPLOAD
RUN = _GUARDS.RUN
PART_MESSAGE = "result upload pieces are append-only: a stored piece cannot change"
PART_INGESTED_MESSAGE = "result upload pieces are append-only: their upload is already ingested"


def _ingested(upload_id: str) -> str:
    return (
        f"EXISTS (SELECT 1 FROM {UPLOAD} u JOIN {RUN} r ON r.id = u.run_id "
        f"WHERE u.id = {upload_id} AND r.result_attempt = u.attempt)"
    )


POSTGRES_FORWARD = f"""
CREATE OR REPLACE FUNCTION runs_resultuploadpart_guard() RETURNS trigger AS $$
BEGIN
    IF {_GUARDS.GUARD_OFF} THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION '{PART_MESSAGE} (id %)', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF TG_OP = 'DELETE' THEN
        IF {_ingested("OLD.upload_id")} THEN
            RAISE EXCEPTION '{PART_INGESTED_MESSAGE} (id %)', OLD.id
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN OLD;
    END IF;
    IF {_ingested("NEW.upload_id")} THEN
        RAISE EXCEPTION '{PART_INGESTED_MESSAGE} (upload %)', NEW.upload_id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER runs_resultuploadpart_guard
    BEFORE INSERT OR UPDATE OR DELETE ON {PART}
    FOR EACH ROW EXECUTE FUNCTION runs_resultuploadpart_guard();
"""
POSTGRES_BACKWARD = f"""
DROP TRIGGER IF EXISTS runs_resultuploadpart_guard ON {PART};
DROP FUNCTION IF EXISTS runs_resultuploadpart_guard();
"""
SQLITE_FORWARD = [
    f"""
CREATE TRIGGER runs_resultuploadpart_update_guard
BEFORE UPDATE ON {PART}
BEGIN
    SELECT RAISE(ABORT, '{PART_MESSAGE}');
END;
""",
    *(
        f"""
CREATE TRIGGER runs_resultuploadpart_{op.lower()}_guard
BEFORE {op} ON {PART}
FOR EACH ROW WHEN {_ingested(f"{row}.upload_id")}
BEGIN
    SELECT RAISE(ABORT, '{PART_INGESTED_MESSAGE}');
END;
"""
        for op, row in (("INSERT", "NEW"), ("DELETE", "OLD"))
    ),
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS runs_resultuploadpart_delete_guard;",
    "DROP TRIGGER IF EXISTS runs_resultuploadpart_insert_guard;",
    "DROP TRIGGER IF EXISTS runs_resultuploadpart_update_guard;",
]


def guards_forward(apps, schema_editor):
    _GUARDS._run(schema_editor, {"postgresql": POSTGRES_FORWARD, "sqlite": SQLITE_FORWARD})


def guards_backward(apps, schema_editor):
    _GUARDS._run(schema_editor, {"postgresql": POSTGRES_BACKWARD, "sqlite": SQLITE_BACKWARD})


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0008_upload_checked_at"),
    ]

    operations = [
        migrations.RunPython(guards_forward, guards_backward, elidable=False),
    ]
