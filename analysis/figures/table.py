"""The table behind a figure, as CSV (every figure module has a ``*_rows`` function)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any


def rows_to_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """RFC 4180 CSV with a header from the first row's keys; ``None`` is an empty cell."""
    if not rows:
        return ""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\r\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return out.getvalue()
