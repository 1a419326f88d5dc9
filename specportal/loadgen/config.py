"""``BenchConfig``: everything that defines one load-generator run (stored in the result)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from specportal.loadgen.endpoints import DEFAULT_PATHS, ENDPOINT_KINDS, EndpointKind
from specportal.metrics import SUMMARY_PERCENTILES, PercentileMethod

Engine = Literal["vllm", "sglang", "llamacpp"]
DatasetName = Literal["random", "bundled", "jsonl", "sharegpt", "mt-bench"]


@dataclass
class WorkloadSpec:
    """Where prompts come from: ``random`` (synthetic), ``bundled``, or a local file."""

    dataset_name: DatasetName = "random"
    dataset_path: str | None = None
    input_len: int = 1024
    output_len: int | None = None  # None: synthetic default 128, files' own lengths
    range_ratio: float = 0.0
    # Synthetic only: random tokens shared by every prompt, before its own ``input_len`` (vLLM's
    # ``--random-prefix-len``); 0: prompts share nothing beyond 2 tokens.
    prefix_len: int = 0
    category: str | None = None  # bundled set to use, or the category to tag synthetic prompts


@dataclass
class BenchConfig:
    base_url: str = "http://127.0.0.1:8000"
    endpoint_kind: EndpointKind = "openai-completions"
    endpoint: str | None = None  # the path; None: the kind's default
    engine: Engine | None = None  # for acceptance counters; None: inferred from /metrics
    backend: str = "openai"  # vLLM's --backend, kept for the vLLM-layout file
    model: str | None = None  # None: /v1/models data[0].id
    served_model_name: str | None = None
    tokenizer: str | None = None  # recorded as the vLLM file's tokenizer_id (the toy one counts)
    num_prompts: int = 1000
    duration: float | None = None  # seconds; when set, requests are issued until it elapses
    max_concurrency: int | None = None
    request_rate: float = math.inf
    burstiness: float = 1.0
    num_warmups: int = 0
    seed: int = 0
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    ignore_eos: bool = False
    sampling: dict[str, Any] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    request_id_prefix: str = "specportal-"
    send_category_header: bool = True
    chunk_token_options: bool = True  # DESIGN §4's per-chunk token options (same for both arms)
    percentiles: tuple[float, ...] = SUMMARY_PERCENTILES
    percentile_method: PercentileMethod = "linear"
    percentile_metrics: tuple[str, ...] = ("ttft", "tpot", "itl")  # vLLM-layout file only
    metric_percentiles: tuple[float, ...] = (99.0,)  # vLLM-layout file only
    goodput_ms: dict[str, float] = field(default_factory=dict)
    scrape_metrics: bool = True
    scrape_interval: float = 1.0
    request_timeout: float = 6 * 60 * 60.0  # vLLM's AIOHTTP_TIMEOUT
    preflight: bool = True
    abort_after_identical_failures: int = 3
    client_processes: int = 1  # past one core: spread the client over processes, merge results
    label: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.endpoint_kind not in ENDPOINT_KINDS:
            raise ValueError(f"unknown endpoint kind {self.endpoint_kind!r}")
        if self.request_rate <= 0 or math.isnan(self.request_rate):
            raise ValueError("request rate must be > 0 (inf sends everything at once)")
        if self.burstiness <= 0:
            raise ValueError("burstiness must be > 0")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError("max concurrency must be > 0")
        if self.num_prompts < 1 and self.duration is None:
            raise ValueError("the number of prompts must be at least 1")
        if self.duration is not None and self.duration <= 0:
            raise ValueError("duration must be > 0")
        if self.client_processes < 1:
            raise ValueError("client processes must be at least 1")
        if (
            self.client_processes > 1
            and self.max_concurrency is not None
            and self.max_concurrency < self.client_processes
        ):
            raise ValueError("max concurrency must be at least the number of client processes")
        if self.duration is not None and math.isinf(self.request_rate) and not self.max_concurrency:
            raise ValueError("a duration-bounded run needs a request rate or a concurrency cap")

    @property
    def path(self) -> str:
        return self.endpoint or DEFAULT_PATHS[self.endpoint_kind]

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + self.path

    @property
    def request_model(self) -> str | None:
        return self.served_model_name or self.model

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["request_rate"] = _float_out(self.request_rate)
        data["burstiness"] = _float_out(self.burstiness)
        data["percentiles"] = list(self.percentiles)
        data["percentile_metrics"] = list(self.percentile_metrics)
        data["metric_percentiles"] = list(self.metric_percentiles)
        data["headers"] = {
            k: ("<redacted>" if k.lower() == "authorization" else v)
            for k, v in self.headers.items()
        }
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchConfig:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in known}
        kw["request_rate"] = _float_in(kw.get("request_rate", math.inf))
        kw["burstiness"] = _float_in(kw.get("burstiness", 1.0))
        for key in ("percentiles", "percentile_metrics", "metric_percentiles"):
            if key in kw:
                kw[key] = tuple(kw[key])
        if isinstance(kw.get("workload"), dict):
            wl_known = {f.name for f in fields(WorkloadSpec)}
            kw["workload"] = WorkloadSpec(
                **{k: v for k, v in kw["workload"].items() if k in wl_known}
            )
        return cls(**kw)


def _float_out(x: float) -> float | str:
    """JSON has no infinity: ``inf`` is stored as the string ``"inf"`` (as vLLM does)."""
    return "inf" if math.isinf(x) else x


def _float_in(x: float | str) -> float:
    return float(x)
