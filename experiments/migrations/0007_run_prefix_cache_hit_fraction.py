"""The run's prefix-cache figure is SpecPortal's own key, a fraction: ``*_hit_fraction`` (DESIGN §4).

Renames the column and, in the result parts already stored on runs, the keys result schema
version 2 renamed (``specportal/loadgen/SCHEMA.md``, "Versions"), so stored runs read like new ones.
"""

from typing import Any

from django.db import migrations

# (field, key path inside it, old name, new name), as in specportal.loadgen.result._RENAMED_IN_2;
# copied, not imported: a migration keeps meaning what it meant when it was written.
RENAMES = (
    ("summary", (), "prefix_cache_hit_rate", "prefix_cache_hit_fraction"),
    ("prefix_cache", (), "hit_rate", "hit_fraction"),
    ("server", ("parsed",), "prefix_cache_hit_fraction", "prefix_cache_counter_hit_fraction"),
)


def _rename(apps: Any, backwards: bool) -> None:
    Run = apps.get_model("experiments", "Run")
    for field, path, old, new in RENAMES:
        if backwards:
            old, new = new, old
        lookup = "__".join((field, *path, "has_key"))
        for run in Run.objects.filter(**{lookup: old}).only("pk", field).iterator():
            holder = getattr(run, field)  # the dict that has the key, changed in place
            for key in path:
                holder = holder[key]
            holder[new] = holder.pop(old)
            run.save(update_fields=[field])


def forward(apps: Any, schema_editor: Any) -> None:
    _rename(apps, backwards=False)


def backward(apps: Any, schema_editor: Any) -> None:
    _rename(apps, backwards=True)


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0006_run_engine_checked"),
    ]

    operations = [
        migrations.RenameField(
            model_name="run",
            old_name="prefix_cache_hit_rate",
            new_name="prefix_cache_hit_fraction",
        ),
        migrations.RunPython(forward, backward),
    ]
