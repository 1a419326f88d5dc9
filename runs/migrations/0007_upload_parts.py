"""Result upload bodies move into ordered pieces (``ResultUploadPart``), so the web process can
stream an upload into the database and never hold it whole (issue 15, finding 5).

Each stored body becomes its upload's piece 0 (the worker reads the pieces in order, whatever
their size) and its size is kept on the upload.
"""

import importlib

import django.db.models.deletion
from django.db import migrations, models

# SQLite removes a column by rebuilding the table, which drops its triggers: the upload guards
# of 0002 (results append-only, finding 10) are created again after it.
_GUARDS = importlib.import_module("runs.migrations.0002_results_append_only")


def sqlite_upload_guards(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    for statement in _GUARDS.SQLITE_FORWARD:
        if f"ON {_GUARDS.UPLOAD}" in statement:
            schema_editor.execute(statement)


def bodies_to_parts(apps, schema_editor):
    ResultUpload = apps.get_model("runs", "ResultUpload")
    ResultUploadPart = apps.get_model("runs", "ResultUploadPart")
    alias = schema_editor.connection.alias
    for upload_id in ResultUpload.objects.using(alias).values_list("pk", flat=True).iterator():
        body = bytes(ResultUpload.objects.using(alias).values_list("body", flat=True).get(pk=upload_id))
        ResultUploadPart.objects.using(alias).create(upload_id=upload_id, number=0, data=body)
        ResultUpload.objects.using(alias).filter(pk=upload_id).update(size=len(body))


def parts_to_bodies(apps, schema_editor):
    ResultUpload = apps.get_model("runs", "ResultUpload")
    ResultUploadPart = apps.get_model("runs", "ResultUploadPart")
    alias = schema_editor.connection.alias
    for upload_id in ResultUpload.objects.using(alias).values_list("pk", flat=True).iterator():
        parts = ResultUploadPart.objects.using(alias).filter(upload_id=upload_id).order_by("number")
        body = b"".join(bytes(data) for data in parts.values_list("data", flat=True))
        ResultUpload.objects.using(alias).filter(pk=upload_id).update(body=body)


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0006_draft_alone_runs'),
    ]

    operations = [
        migrations.AddField(
            model_name='resultupload',
            name='size',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.CreateModel(
            name='ResultUploadPart',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.PositiveIntegerField()),
                ('data', models.BinaryField()),
                ('upload', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='parts', to='runs.resultupload')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('upload', 'number'), name='result_upload_part_once')],
            },
        ),
        migrations.AlterField(
            model_name='resultupload',
            name='body',
            field=models.BinaryField(default=b''),
        ),
        migrations.RunPython(bodies_to_parts, parts_to_bodies),
        migrations.RemoveField(
            model_name='resultupload',
            name='body',
        ),
        migrations.RunPython(sqlite_upload_guards, migrations.RunPython.noop),
    ]
