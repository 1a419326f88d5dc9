"""A stored run written in ``vllm bench serve --save-result --save-detailed``'s layout.

The summary's keys are already vLLM's (``specportal.metrics``); the per-request arrays are
recomputed from the stored chunk times with the same definitions, failed requests as vLLM
writes them (0 and empty).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from runs.models import Run
from specportal import metrics


def vllm_layout(run: Run, requests: Iterable[metrics.Timing]) -> dict[str, Any]:
    summary = dict(run.summary or {})
    config = run.arm.configuration.document
    out: dict[str, Any] = {
        "backend": "openai-chat",
        "model_id": (config.get("target") or {}).get("model"),
        "label": run.arm.label,
        "max_concurrency": next(
            (load.get("concurrency") for load in run.experiment.loads if load["name"] == run.load),
            None,
        ),
    }
    vllm_keys = [k for k in summary if not k.startswith(("content_", "amortized_"))]
    out.update({k: summary[k] for k in vllm_keys})
    input_lens, output_lens, ttfts, itls, latencies, starts = [], [], [], [], [], []
    for r in requests:
        input_lens.append(r.prompt_tokens or 0)
        output_lens.append((metrics.output_len(r) or 0) if r.success else 0)
        ttfts.append((metrics.ttft(r) or 0.0) if r.success else 0.0)
        itls.append(metrics.chunk_gaps(r) if r.success else [])
        latencies.append((metrics.e2el(r) or 0.0) if r.success else 0.0)
        starts.append(r.sent)
    out.update(
        {
            "input_lens": input_lens,
            "output_lens": output_lens,
            "ttfts": ttfts,
            "itls": itls,
            "latencies": latencies,
            "start_times": starts,
        }
    )
    return out
