# Import-mode experiments and the CI context (issue 13).

from django.db import migrations, models

from specportal.api.sqlite_triggers import SqliteTriggersKept

triggers = SqliteTriggersKept()


class Migration(migrations.Migration):

    dependencies = [
        ("experiments", "0003_experimentfigures"),
    ]

    operations = [
        triggers.save(),
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
        triggers.restore(),
    ]
