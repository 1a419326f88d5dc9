"""The protocol's bounds, named once: the portal refuses past them at creation or upload, the
schema states them, and the agent never meets a value the load generator or the database
cannot take.
"""

from __future__ import annotations

from typing import Final

# PostgreSQL's ``integer`` (the per-request table's index and token counts, its int[] arrays).
INT4_MAX: Final = 2**31 - 1
# PostgreSQL's ``bigint`` (ids, OFFSET): a larger integer reaching a query is an error there.
INT8_MAX: Final = 2**63 - 1

# Names of workloads and load levels: a run's ``workload`` and ``load`` columns hold 100.
NAME_MAX_LENGTH: Final = 100
# Workloads and load levels per experiment (the matrix is their product, times repetitions and
# arms, in runs).
MAX_WORKLOADS: Final = 100
MAX_LOADS: Final = 100
# Repetitions of each cell. Three to ten is what a decision needs; 100 is already a week of GPU.
MAX_REPETITIONS: Final = 100
# Measured requests a run may be asked for, and records an upload may carry (a duration-bounded
# run is bounded by this too). 100,000 requests of ~100 chunks is a 400 MB result document that
# ingests in seconds; ten times that is the most a run may hold.
MAX_REQUESTS_PER_RUN: Final = 1_000_000
# Warmup requests before each run (not measured).
MAX_WARMUP_REQUESTS: Final = 100_000
# A run's duration: a day (the broker's visibility timeout, six hours by default, is checked at
# start on top of this).
MAX_DURATION_SECONDS: Final = 86_400.0
# In-flight requests of a closed loop.
MAX_CONCURRENCY: Final = 100_000
# Requests per second of an open loop.
MAX_REQUEST_RATE: Final = 1_000_000.0
# Gamma shape of a bursty arrival process (1: Poisson).
MAX_BURSTINESS: Final = 1_000.0
# Prompt and output lengths in tokens (vLLM's --max-model-len is bounded at 10 M).
MAX_TOKENS: Final = 10_000_000
# A per-request SLO, in milliseconds (a day).
MAX_SLO_MS: Final = 86_400_000.0
# Paths and short texts.
PATH_MAX_LENGTH: Final = 4096
TEXT_MAX_LENGTH: Final = 1_000

# Columns of the per-request table that are ``varchar(n)`` (a longer value would make the COPY of
# the whole upload fail).
FINISH_REASON_MAX_LENGTH: Final = 32
CATEGORY_MAX_LENGTH: Final = 32
TEXT_HASH_MAX_LENGTH: Final = 64
# Kept on the run so a page can show why an engine died; the full log stays on the host.
LOG_EXCERPT_CHARS: Final = 20_000
