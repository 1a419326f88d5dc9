"""Run.draft_alone_configuration: the configuration a calibrate_draft_cost run serves.

Added with ALTER TABLE ... ADD COLUMN on both vendors: Django's SQLite AddField of a foreign key
rebuilds the table, which would drop the append-only triggers of ``0002_results_append_only``.
"""

import django.db.models.deletion
from django.db import migrations, models

ADD = (
    "ALTER TABLE runs_run ADD COLUMN draft_alone_configuration_id bigint NULL "
    "REFERENCES configurations_frozenconfiguration (id) DEFERRABLE INITIALLY DEFERRED"
)
INDEX = (
    "CREATE INDEX runs_run_draft_alone_configuration_id ON runs_run (draft_alone_configuration_id)"
)


class Migration(migrations.Migration):
    dependencies = [
        ("configurations", "0002_identity_on_insert"),
        ("runs", "0005_upload_refusal"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(ADD, "ALTER TABLE runs_run DROP COLUMN draft_alone_configuration_id"),
                migrations.RunSQL(INDEX, "DROP INDEX runs_run_draft_alone_configuration_id"),
            ],
            state_operations=[
                migrations.AddField(
                    model_name="run",
                    name="draft_alone_configuration",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="draft_alone_runs",
                        to="configurations.frozenconfiguration",
                    ),
                ),
            ],
        ),
    ]
