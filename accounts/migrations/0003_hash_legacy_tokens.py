"""Users' API tokens were DRF ``authtoken`` keys, stored in clear (and listed in the admin): hash
each into an ``ApiToken`` (the same key keeps working: it hashes to the stored digest) and drop the
clear table. ``rest_framework.authtoken`` is no longer installed, so its table is read with SQL,
when it exists (a database created after this change never had one).

A legacy token gets scope ``full`` (what it could do before), a public prefix ``legacy_<random>``
(the old key has no part that is not secret) and an expiry of ``SPECPORTAL_API_TOKEN_MAX_DAYS``
from now (it may have been read from the clear table already).
"""

import hashlib
import secrets
import string
from datetime import timedelta

from django.conf import settings
from django.db import migrations
from django.utils import timezone

LEGACY_TABLE = "authtoken_token"


def _legacy_prefix() -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "legacy_" + "".join(secrets.choice(alphabet) for _ in range(8))


def hash_legacy_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if LEGACY_TABLE not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("accounts", "ApiToken")
    now = timezone.now()
    longest = int(getattr(settings, "SPECPORTAL_API_TOKEN_MAX_DAYS", 0) or 0)
    expires_at = now + timedelta(days=longest) if longest else None
    table = schema_editor.quote_name(LEGACY_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, user_id, created FROM {table}")
        rows = cursor.fetchall()
    for key, user_id, created in rows:
        ApiToken.objects.create(
            user_id=user_id,
            name="legacy token",
            scope="full",
            prefix=_legacy_prefix(),
            token_hash=hashlib.sha256(key.encode()).hexdigest(),
            created_at=created or now,
            expires_at=expires_at,
        )
    schema_editor.execute(f"DROP TABLE {table}")


class Migration(migrations.Migration):
    dependencies = [("accounts", "0002_api_tokens")]
    # Irreversible on purpose: going back would need the clear keys, which are gone.
    operations = [migrations.RunPython(hash_legacy_tokens, migrations.RunPython.noop)]
