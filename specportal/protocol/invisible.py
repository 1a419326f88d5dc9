"""Invisible formatting characters that names must not hold (issue 15, finding 12).

A right-to-left override (U+202E) makes ``evil\u202etxt.exe`` read as ``evilexe.txt``: a name
that displays as one thing and is another ("Trojan Source", CVE-2021-42574). Names are shown on
pages, in diffs and in audit events, so they refuse the bidirectional embeddings, overrides and
isolates, the directional marks and the Arabic letter mark. Free text (descriptions, reasons) is
not checked: it is shown as text, never used to tell things apart.

Django-free: the protocol's checks, the API's fields (``specportal.api.input``) and the services
that take names from the command line use this one function.
"""

from __future__ import annotations

import unicodedata
from typing import Final

INVISIBLE_FORMATTING: Final = frozenset(
    [
        *(chr(c) for c in range(0x202A, 0x202F)),  # LRE, RLE, PDF, LRO, RLO
        *(chr(c) for c in range(0x2066, 0x206A)),  # LRI, RLI, FSI, PDI
        "\u200e",  # LEFT-TO-RIGHT MARK
        "\u200f",  # RIGHT-TO-LEFT MARK
        "\u061c",  # ARABIC LETTER MARK
    ]
)


def invisible_formatting(value: str) -> str | None:
    """Why ``value`` cannot be a name (None: it can): the first invisible formatting character,
    by code point, name and position."""
    if value.isascii():  # the usual case, known to CPython for free
        return None
    for position, char in enumerate(value):
        if char in INVISIBLE_FORMATTING:
            return (
                f"must not contain invisible formatting characters (U+{ord(char):04X} "
                f"{unicodedata.name(char)} at position {position}): they make a name display as "
                "something other than what it is"
            )
    return None
