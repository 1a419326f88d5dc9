"""Array columns that work on PostgreSQL (native arrays, filled by COPY) and on SQLite (JSON text).

A run keeps every chunk's arrival time and token count of every request (DESIGN §4). One row per
chunk would be ~10 million rows for a 100,000-request run; one row per request with the chunk
data as arrays keeps ingestion to a single COPY of 100,000 rows.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper


class _ArrayField(models.Field):  # type: ignore[type-arg]
    element_type = ""

    def db_type(self, connection: BaseDatabaseWrapper) -> str:
        if connection.vendor == "postgresql":
            return f"{self.element_type}[]"
        return "text"

    def from_db_value(self, value: Any, expression: Any, connection: BaseDatabaseWrapper) -> Any:
        if isinstance(value, str):
            return json.loads(value)
        return value

    def get_db_prep_value(
        self, value: Any, connection: BaseDatabaseWrapper, prepared: bool = False
    ) -> Any:
        if value is None or connection.vendor == "postgresql":
            return None if value is None else list(value)
        return json.dumps(list(value), separators=(",", ":"))


class FloatArrayField(_ArrayField):
    """``double precision[]`` on PostgreSQL."""

    element_type = "double precision"


class IntegerArrayField(_ArrayField):
    """``integer[]`` on PostgreSQL."""

    element_type = "integer"
