"""Experiment.calibrate_draft_cost.

Added with ALTER TABLE ... ADD COLUMN on both vendors: Django's SQLite AddField rebuilds the
table, which the lock triggers of ``0002_lock_hosts_and_arms`` (on the arms and hosts tables,
reading this one) do not survive.
"""

from django.db import migrations, models

ADD = (
    "ALTER TABLE experiments_experiment ADD COLUMN calibrate_draft_cost boolean "
    "DEFAULT false NOT NULL"
)


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0004_mode_context"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    ADD, "ALTER TABLE experiments_experiment DROP COLUMN calibrate_draft_cost"
                ),
            ],
            state_operations=[
                migrations.AddField(
                    model_name="experiment",
                    name="calibrate_draft_cost",
                    field=models.BooleanField(default=False),
                ),
            ],
        ),
    ]
