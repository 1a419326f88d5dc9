"""The load generator (Django-free): arrival processes, streaming clients, per-request records.

The Python API agents call::

    from specportal.loadgen import BenchConfig, run_benchmark
    result = run_benchmark(BenchConfig(base_url="http://127.0.0.1:8000", num_prompts=50,
                                       max_concurrency=8))
    payload = result.to_json()          # the versioned document of SCHEMA.md

``Result.from_json`` reads it back; ``specportal.formats.vllm`` writes and reads ``vllm bench serve``'s
``--save-result`` layout.
"""

from specportal.loadgen.config import BenchConfig, WorkloadSpec
from specportal.loadgen.records import RequestRecord
from specportal.loadgen.result import SCHEMA_VERSION, Result
from specportal.loadgen.runner import BenchAborted, PreflightError, run_benchmark
from specportal.loadgen.sharding import ClientProcessLost

__all__ = [
    "SCHEMA_VERSION",
    "BenchAborted",
    "BenchConfig",
    "ClientProcessLost",
    "PreflightError",
    "RequestRecord",
    "Result",
    "WorkloadSpec",
    "run_benchmark",
]
