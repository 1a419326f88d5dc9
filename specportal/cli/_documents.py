"""Reading configuration files for the CLI commands (shared by lint and launch-command)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from specportal.cli import CliError


def read_document(path: str) -> dict[str, Any]:
    """A document from a JSON file (``-`` for stdin); an example-style wrapper
    ``{"name": ..., "document": {...}}`` is unwrapped."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise CliError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    if isinstance(data, dict) and isinstance(data.get("document"), dict):
        data = data["document"]
    if not isinstance(data, dict):
        raise CliError(f"{path}: a configuration document must be a JSON object")
    return data
