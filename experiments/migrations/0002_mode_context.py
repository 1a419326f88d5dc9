# Import-mode experiments and the CI context (issue 13).

import importlib

from django.db import migrations, models

# SQLite adds a column with a default by rebuilding the table, which its lock-guard triggers
# (0001) name: drop them for the rebuild and create them again after.
_initial = importlib.import_module("experiments.migrations.0001_initial")


def _sqlite(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            for statement in statements:
                schema_editor.execute(statement, params=None)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ("experiments", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(
            _sqlite(_initial.SQLITE_BACKWARD), _sqlite(_initial.SQLITE_FORWARD)
        ),
        migrations.AddField(
            model_name="experiment",
            name="context",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="experiment",
            name="mode",
            field=models.CharField(
                choices=[("measured", "Measured"), ("import", "Import")],
                default="measured",
                max_length=16,
            ),
        ),
        migrations.RunPython(
            _sqlite(_initial.SQLITE_FORWARD), _sqlite(_initial.SQLITE_BACKWARD)
        ),
    ]
