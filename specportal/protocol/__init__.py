"""The documents that cross the portal↔agent wire, typed, versioned and checked (``SCHEMA.md``).

* :class:`Workload` and :class:`LoadLevel`: an experiment's workloads and load levels (checked
  when the experiment is created);
* :class:`RunSpec`: what the agent API serves for a run;
* :class:`EngineReport`: the engine's self-report and the agent's checks of it, one spelling for
  progress calls and the result; :class:`Progress`: a progress call;
* :class:`ResultEnvelope`: what the agent uploads (the load generator's result inside), checked
  whole before anything is kept.

Each has ``to_dict``/``from_dict``, a schema version and ``upgrade()`` for older versions;
``from_dict`` raises :class:`ProtocolError` with ``fields`` (``{dotted.path: [messages]}``).
Django-free: the agent and the portal import it alike.
"""

from specportal.protocol import limits
from specportal.protocol.engine_report import EngineReport, Progress
from specportal.protocol.envelope import (
    ResultEnvelope,
    acceptance_rate,
    decode_json,
    prefix_cache_hit_fraction,
    settle,
)
from specportal.protocol.errors import ProtocolError
from specportal.protocol.runspec import RunSpec
from specportal.protocol.workload import LoadLevel, Workload

__all__ = [
    "EngineReport",
    "LoadLevel",
    "Progress",
    "ProtocolError",
    "ResultEnvelope",
    "RunSpec",
    "Workload",
    "acceptance_rate",
    "decode_json",
    "limits",
    "prefix_cache_hit_fraction",
    "settle",
]
