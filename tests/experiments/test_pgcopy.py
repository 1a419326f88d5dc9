from __future__ import annotations

import pytest
from django.db import connection

from experiments import pgcopy

pytestmark = pytest.mark.django_db


def test_binary_copy_round_trips_arrays_nulls_and_text_through_postgresql() -> None:
    # given rows with every column kind, empty arrays and nulls
    kinds = [
        pgcopy.BIGINT,
        pgcopy.INT,
        pgcopy.FLOAT,
        pgcopy.FLOAT_ARRAY,
        pgcopy.INT_ARRAY,
        pgcopy.BOOL,
        pgcopy.TEXT,
    ]
    rows = [
        (1, 0, 0.5, [0.25, 1e-9, 12345.678901234], [0, 3, 2], True, "stop"),
        (2, 1, None, [], None, False, "ünïcode\ttab\nline"),
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE copy_probe (a bigint, b int, c float8, d float8[], e int4[], f bool, g text)"
        )
        # when they go in through binary COPY
        with cursor.cursor.copy("COPY copy_probe FROM STDIN (FORMAT BINARY)") as copy:
            for block in pgcopy.encode_rows(kinds, rows, batch=1):
                copy.write(block)
        cursor.execute("SELECT a, b, c, d, e, f, g FROM copy_probe ORDER BY a")
        stored = cursor.fetchall()
    # then PostgreSQL reads back exactly what was written
    assert [tuple(r) for r in stored] == [tuple(r) for r in rows]
