from __future__ import annotations

import pytest
from django.db import connection

from runs import pgcopy

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


def test_binary_copy_keeps_each_rows_arrays_when_a_batch_mixes_nulls_and_empty_arrays() -> None:
    # given a batch where arrays of different lengths, empty arrays and nulls alternate, so the
    # batch's one flat conversion must be sliced back at the right offsets
    kinds = [pgcopy.BIGINT, pgcopy.FLOAT_ARRAY, pgcopy.INT_ARRAY]
    rows = [
        (1, [0.5, 1.5], [1]),
        (2, [], None),
        (3, [2.5], [2, 3, 4]),
        (4, [3.5, 4.5, 5.5], []),
        (5, [6.5], [5]),
    ]
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE copy_batch_probe (a bigint, d float8[], e int4[])")
        # when they go in through binary COPY, several rows per block
        with cursor.cursor.copy("COPY copy_batch_probe FROM STDIN (FORMAT BINARY)") as copy:
            for block in pgcopy.encode_rows(kinds, rows, batch=3):
                copy.write(block)
        cursor.execute("SELECT a, d, e FROM copy_batch_probe ORDER BY a")
        stored = cursor.fetchall()
    # then every row reads back with its own arrays
    assert [tuple(r) for r in stored] == rows


def test_encoding_refuses_a_row_with_the_wrong_number_of_values() -> None:
    # given a row one value short; when it is encoded; then the encoder refuses it
    with pytest.raises(ValueError):
        list(pgcopy.encode_rows([pgcopy.BIGINT, pgcopy.TEXT], [(1, "a"), (2,)]))
