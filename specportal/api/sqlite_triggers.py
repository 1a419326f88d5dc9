"""Migrations that rebuild a table on SQLite keep its triggers (``SqliteTriggersKept``).

SQLite alters a column, or adds one with a default, by rebuilding the table: a trigger on it is
dropped with the old table, and a trigger of another table naming it breaks the rename. Wrapping
such operations between ``SqliteTriggersKept.save()`` and ``.restore()`` drops every trigger first
and creates each again, byte for byte, afterwards. PostgreSQL alters in place: both are no-ops.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations


class SqliteTriggersKept:
    def __init__(self) -> None:
        self._saved: list[tuple[str, str]] = []

    def _save(self, apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "sqlite":
            return
        with schema_editor.connection.cursor() as cursor:
            cursor.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
            self._saved = [(str(name), str(sql)) for name, sql in cursor.fetchall()]
        for name, _ in self._saved:
            schema_editor.execute(f'DROP TRIGGER IF EXISTS "{name}"', params=None)

    def _restore(self, apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "sqlite":
            return
        for _, sql in self._saved:
            schema_editor.execute(sql, params=None)
        self._saved = []

    def save(self) -> migrations.RunPython:
        return migrations.RunPython(self._save, self._restore)

    def restore(self) -> migrations.RunPython:
        return migrations.RunPython(self._restore, self._save)
