"""Frozen identity closed in the database: checked on INSERT too, ids never reused (issue 15).

* ``canonical``, ``target_canonical``, ``proposal_canonical``: the RFC 8785 bytes the three hashes
  are of, stored beside the document (filled here for existing rows) and guarded like it.
* PostgreSQL: a BEFORE INSERT trigger checks ``sha256(canonical) = config_hash`` (and the target's
  and proposal's), ``canonical::jsonb = document`` (and ``document->'target'``,
  ``document->'proposal'``) and ``engine = document->>'engine'``. SQLite has no SHA-256: the model
  checks it there (``FrozenConfiguration.identity_check``).
* Both vendors: an AFTER DELETE trigger writes the id into ``ConfigurationTombstone`` (which
  refuses UPDATE and DELETE), and an INSERT under a tombstoned id is refused.
* PostgreSQL: ``SET LOCAL specportal.identity_guard = 'off'`` now switches the guards off only for
  the tables' owner (or a superuser): the web process's role, which does not own them
  (``manage.py db_roles``), cannot.
"""

import hashlib

import rfc8785
from django.db import migrations, models

TABLE = "configurations_frozenconfiguration"
TOMBSTONE = "configurations_configurationtombstone"
COLUMNS = (
    "config_hash",
    "target_hash",
    "proposal_hash",
    "engine",
    "method",
    "document",
    "created_by_id",
    "created_at",
    "canonical",
    "target_canonical",
    "proposal_canonical",
)
OLD_COLUMNS = COLUMNS[:8]
MESSAGE = "frozen configuration is immutable: identity columns cannot change"
INSERT_MESSAGE = "frozen configuration identity does not match its document"
REUSE_MESSAGE = "frozen configuration id was deleted and cannot be used again"
TOMBSTONE_MESSAGE = "configuration tombstones are append-only"
# Only the owner of the table (or a superuser) may switch the guards off, explicitly.
GUARD_OFF = (
    "coalesce(current_setting('specportal.identity_guard', true), '') = 'off' AND "
    "pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'USAGE')"
)


def _update_guard(columns, guard_off):
    return f"""
CREATE OR REPLACE FUNCTION configurations_frozenconfiguration_identity_guard() RETURNS trigger AS $$
BEGIN
    IF {guard_off} THEN
        RETURN NEW;
    END IF;
    IF {" OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in columns)} THEN
        RAISE EXCEPTION '{MESSAGE} (id %)', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
"""


POSTGRES_FORWARD = [
    _update_guard(COLUMNS, GUARD_OFF),
    f"""
CREATE OR REPLACE FUNCTION configurations_frozenconfiguration_insert_guard() RETURNS trigger AS $$
BEGIN
    IF {GUARD_OFF} THEN
        RETURN NEW;
    END IF;
    IF EXISTS (SELECT 1 FROM {TOMBSTONE} t WHERE t.id = NEW.id) THEN
        RAISE EXCEPTION '{REUSE_MESSAGE} (id %)', NEW.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF encode(sha256(NEW.canonical), 'hex') IS DISTINCT FROM NEW.config_hash
       OR encode(sha256(NEW.target_canonical), 'hex') IS DISTINCT FROM NEW.target_hash
       OR encode(sha256(NEW.proposal_canonical), 'hex') IS DISTINCT FROM NEW.proposal_hash
       OR convert_from(NEW.canonical, 'UTF8')::jsonb IS DISTINCT FROM NEW.document
       OR convert_from(NEW.target_canonical, 'UTF8')::jsonb IS DISTINCT FROM NEW.document->'target'
       OR convert_from(NEW.proposal_canonical, 'UTF8')::jsonb
          IS DISTINCT FROM coalesce(NEW.document->'proposal', '{{}}'::jsonb)
       OR NEW.engine IS DISTINCT FROM NEW.document->>'engine' THEN
        RAISE EXCEPTION '{INSERT_MESSAGE} (config_hash %)', NEW.config_hash
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
EXCEPTION
    WHEN character_not_in_repertoire OR untranslatable_character OR invalid_text_representation
    THEN
        RAISE EXCEPTION '{INSERT_MESSAGE}: canonical bytes are not JSON (config_hash %)',
            NEW.config_hash USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER configurations_frozenconfiguration_insert_guard
    BEFORE INSERT ON {TABLE}
    FOR EACH ROW EXECUTE FUNCTION configurations_frozenconfiguration_insert_guard();

CREATE OR REPLACE FUNCTION configurations_frozenconfiguration_tombstone() RETURNS trigger AS $$
BEGIN
    INSERT INTO {TOMBSTONE} (id, config_hash, deleted_at) VALUES (OLD.id, OLD.config_hash, now())
        ON CONFLICT (id) DO NOTHING;
    RETURN OLD;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER configurations_frozenconfiguration_tombstone
    AFTER DELETE ON {TABLE}
    FOR EACH ROW EXECUTE FUNCTION configurations_frozenconfiguration_tombstone();

CREATE OR REPLACE FUNCTION configurations_configurationtombstone_guard() RETURNS trigger AS $$
BEGIN
    IF {GUARD_OFF} THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    RAISE EXCEPTION '{TOMBSTONE_MESSAGE}' USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER configurations_configurationtombstone_guard
    BEFORE UPDATE OR DELETE ON {TOMBSTONE}
    FOR EACH ROW EXECUTE FUNCTION configurations_configurationtombstone_guard();
""",
]
POSTGRES_BACKWARD = [
    f"""
DROP TRIGGER IF EXISTS configurations_configurationtombstone_guard ON {TOMBSTONE};
DROP FUNCTION IF EXISTS configurations_configurationtombstone_guard();
DROP TRIGGER IF EXISTS configurations_frozenconfiguration_tombstone ON {TABLE};
DROP FUNCTION IF EXISTS configurations_frozenconfiguration_tombstone();
DROP TRIGGER IF EXISTS configurations_frozenconfiguration_insert_guard ON {TABLE};
DROP FUNCTION IF EXISTS configurations_frozenconfiguration_insert_guard();
""",
    _update_guard(
        OLD_COLUMNS, "coalesce(current_setting('specportal.identity_guard', true), '') = 'off'"
    ),
]


def _sqlite_update_guard(columns):
    return f"""
CREATE TRIGGER configurations_frozenconfiguration_identity_guard
BEFORE UPDATE ON {TABLE}
FOR EACH ROW WHEN {" OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in columns)}
BEGIN
    SELECT RAISE(ABORT, '{MESSAGE}');
END;
"""


SQLITE_FORWARD = [
    "DROP TRIGGER IF EXISTS configurations_frozenconfiguration_identity_guard;",
    _sqlite_update_guard(COLUMNS),
    # AFTER INSERT: in a BEFORE INSERT trigger SQLite does not know the id it will assign yet.
    f"""
CREATE TRIGGER configurations_frozenconfiguration_reuse_guard
AFTER INSERT ON {TABLE}
FOR EACH ROW WHEN EXISTS (SELECT 1 FROM {TOMBSTONE} WHERE id = NEW.id)
BEGIN
    SELECT RAISE(ABORT, '{REUSE_MESSAGE}');
END;
""",
    f"""
CREATE TRIGGER configurations_frozenconfiguration_tombstone
AFTER DELETE ON {TABLE}
FOR EACH ROW
BEGIN
    INSERT OR IGNORE INTO {TOMBSTONE} (id, config_hash, deleted_at)
        VALUES (OLD.id, OLD.config_hash, strftime('%Y-%m-%d %H:%M:%f', 'now'));
END;
""",
    f"""
CREATE TRIGGER configurations_configurationtombstone_update_guard
BEFORE UPDATE ON {TOMBSTONE}
BEGIN
    SELECT RAISE(ABORT, '{TOMBSTONE_MESSAGE}');
END;
""",
    f"""
CREATE TRIGGER configurations_configurationtombstone_delete_guard
BEFORE DELETE ON {TOMBSTONE}
BEGIN
    SELECT RAISE(ABORT, '{TOMBSTONE_MESSAGE}');
END;
""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS configurations_configurationtombstone_delete_guard;",
    "DROP TRIGGER IF EXISTS configurations_configurationtombstone_update_guard;",
    "DROP TRIGGER IF EXISTS configurations_frozenconfiguration_tombstone;",
    "DROP TRIGGER IF EXISTS configurations_frozenconfiguration_reuse_guard;",
    "DROP TRIGGER IF EXISTS configurations_frozenconfiguration_identity_guard;",
    _sqlite_update_guard(OLD_COLUMNS),
]


def _run(schema_editor, statements):
    vendor = schema_editor.connection.vendor
    if vendor not in statements:
        raise RuntimeError(f"no identity guard for database vendor {vendor!r}")
    for statement in statements[vendor]:
        schema_editor.execute(statement, params=None)


def _canonical(value):
    return bytes(rfc8785.dumps(value))


def fill_canonical(apps, schema_editor):
    """Existing rows get the bytes their hashes were taken of; a row whose hash does not match
    its document stops the migration (it was never frozen, and must be looked at)."""
    config_model = apps.get_model("configurations", "FrozenConfiguration")
    alias = schema_editor.connection.alias
    for config in config_model.objects.using(alias).iterator():
        doc = config.document
        parts = {
            "canonical": _canonical(doc),
            "target_canonical": _canonical(doc["target"]),
            "proposal_canonical": _canonical(doc.get("proposal", {})),
        }
        if hashlib.sha256(parts["canonical"]).hexdigest() != config.config_hash:
            raise RuntimeError(
                f"frozen configuration {config.pk}: config_hash is not its document's"
            )
        config_model.objects.using(alias).filter(pk=config.pk).update(**parts)


def guards_forward(apps, schema_editor):
    _run(schema_editor, {"postgresql": POSTGRES_FORWARD, "sqlite": SQLITE_FORWARD})


def guards_backward(apps, schema_editor):
    _run(schema_editor, {"postgresql": POSTGRES_BACKWARD, "sqlite": SQLITE_BACKWARD})


class Migration(migrations.Migration):
    dependencies = [
        ("configurations", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="ConfigurationTombstone",
            fields=[
                ("id", models.BigIntegerField(primary_key=True, serialize=False)),
                ("config_hash", models.CharField(max_length=64)),
                ("deleted_at", models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.AddField(
            model_name="frozenconfiguration",
            name="canonical",
            field=models.BinaryField(default=b"", editable=False),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="frozenconfiguration",
            name="proposal_canonical",
            field=models.BinaryField(default=b"", editable=False),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="frozenconfiguration",
            name="target_canonical",
            field=models.BinaryField(default=b"", editable=False),
            preserve_default=False,
        ),
        migrations.RunPython(fill_canonical, migrations.RunPython.noop),
        migrations.RunPython(guards_forward, guards_backward),
    ]
