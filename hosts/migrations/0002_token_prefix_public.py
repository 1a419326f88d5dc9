"""A host token's ``token_prefix`` was its first 12 characters, ``sph_`` and 8 of the secret, shown
to every viewer of the host. Tokens issued from now on are ``sph_<public id>_<secret>`` and show
only ``sph_<public id>`` (``accounts.tokens``); a token issued before keeps working (its hash is
unchanged) but its prefix becomes ``sph_`` alone: none of it was public."""

from django.db import migrations


def hide_secret_prefixes(apps, schema_editor):
    # Every prefix stored before this migration is of the old format.
    apps.get_model("hosts", "GpuHost").objects.exclude(token_prefix="").update(token_prefix="sph_")


class Migration(migrations.Migration):
    dependencies = [("hosts", "0001_initial")]
    operations = [migrations.RunPython(hide_secret_prefixes, migrations.RunPython.noop)]
