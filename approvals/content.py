"""Workloads and load levels matched by content, not by name.

A deployment lists the workloads and load levels that represent it as normalised documents
(``specportal.protocol`` ``Workload`` / ``LoadLevel``, ``to_dict()``); an experiment's cell counts
for a deployment's cell when their contents are equal:

- a workload's content is every key of its normalised document except ``name``,
  ``schema_version`` and ``runner`` (the name is a label; the runner is the measuring tool, not
  what is asked of the server);
- a load level's content is its arrival shape: ``concurrency``, ``request_rate`` and
  ``burstiness``. ``requests`` and ``duration_s`` say how long it was measured, not what load it is
  (a 400-request and a 1,000-request run at concurrency 32 measure the same load level).

No engine or load-generator default is filled in: ``null`` matches only ``null``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specportal.engines.document import sha256_hex
from specportal.protocol import LoadLevel, Workload

WORKLOAD_LABEL_KEYS = frozenset({"name", "schema_version", "runner"})
LOAD_CONTENT_KEYS = ("concurrency", "request_rate", "burstiness")


def workload_normalise(document: Mapping[str, Any], *, path: str = "") -> dict[str, Any]:
    """The normalised document (raises ``ProtocolError`` with dotted paths)."""
    return Workload.from_dict(dict(document), path=path).to_dict()


def load_normalise(document: Mapping[str, Any], *, path: str = "") -> dict[str, Any]:
    return LoadLevel.from_dict(dict(document), path=path).to_dict()


def workload_content(document: Mapping[str, Any]) -> dict[str, Any]:
    normalised = workload_normalise(document)
    return {k: v for k, v in normalised.items() if k not in WORKLOAD_LABEL_KEYS}


def load_content(document: Mapping[str, Any]) -> dict[str, Any]:
    normalised = load_normalise(document)
    return {key: normalised.get(key) for key in LOAD_CONTENT_KEYS}


def workload_key(document: Mapping[str, Any]) -> str:
    return sha256_hex(workload_content(document))


def load_key(document: Mapping[str, Any]) -> str:
    return sha256_hex(load_content(document))
