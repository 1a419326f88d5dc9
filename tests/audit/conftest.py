from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def head_log(tmp_path: Path) -> Iterator[Path]:
    """The audit head log as a file of this test's own (what SPECPORTAL_AUDIT_HEAD_LOG names)."""
    path = tmp_path / "audit-head.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    logger = logging.getLogger("audit.chain")
    logger.addHandler(handler)
    try:
        yield path
    finally:
        logger.removeHandler(handler)
        handler.close()
