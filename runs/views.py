"""Server-rendered run pages: a run's summary, self-report, gauges, requests (keyset pages), a
request's chunk timeline, and downloads. Reads only."""

from __future__ import annotations

import json
from typing import Any, Final

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from analysis.figures import ArmRef, RunGauges, TimelineRequest, gauges_figure, timeline_figure
from runs import selectors
from runs.downloads import vllm_layout
from runs.models import RequestRecord, Run

REQUESTS_PAGE: Final = 50
SUMMARY_KEYS: Final = (
    ("completed", "completed requests", ""),
    ("failed", "failed requests", ""),
    ("duration", "measured interval", "s"),
    ("output_throughput", "output throughput", "tokens/s"),
    ("request_throughput", "request throughput", "requests/s"),
    ("median_ttft_ms", "median TTFT", "ms"),
    ("p99_ttft_ms", "p99 TTFT", "ms"),
    ("median_tpot_ms", "median TPOT", "ms"),
    ("p99_tpot_ms", "p99 TPOT", "ms"),
    ("median_itl_ms", "median chunk gap (ITL)", "ms"),
    ("p99_itl_ms", "p99 chunk gap (ITL)", "ms"),
    ("median_e2el_ms", "median E2E", "ms"),
    ("p99_e2el_ms", "p99 E2E", "ms"),
    ("mean_tokens_per_chunk", "mean tokens per chunk", "tokens"),
    ("amortized_decode_ms_per_token", "amortized decode time", "ms/token"),
    ("slo_attainment", "SLO attainment", "fraction"),
    ("max_concurrent_requests", "peak requests in flight", ""),
)


def _requests_page(run: Run, after: int) -> dict[str, Any]:
    rows = selectors.request_records_page(run=run, after=after, limit=REQUESTS_PAGE + 1)
    more = len(rows) > REQUESTS_PAGE
    rows = rows[:REQUESTS_PAGE]
    first_sent = (
        RequestRecord.objects.filter(run=run)
        .order_by("index")
        .values_list("sent", flat=True)
        .first()
    )
    shown = []
    for row in rows:
        times = row["chunk_times"] or []
        sent = row["sent"]
        shown.append(
            {
                "index": row["index"],
                "sent_s": sent - first_sent
                if sent is not None and first_sent is not None
                else None,
                "ttft_ms": (times[0] - sent) * 1000 if times and sent is not None else None,
                "e2el_ms": (times[-1] - sent) * 1000 if times and sent is not None else None,
                "output_tokens": row["output_tokens"],
                "chunks": len(times),
                "finish_reason": row["finish_reason"],
                "success": row["success"],
                "error": row["error"],
            }
        )
    return {
        "rows": shown,
        "after": after,
        "next_after": rows[-1]["index"] if more and rows else None,
    }


@login_required
def run_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get(run_id=run_id)
    after = (
        int(request.GET.get("after", "-1"))
        if request.GET.get("after", "").lstrip("-").isdecimal()
        else -1
    )
    page = _requests_page(run, after)
    if request.htmx:  # type: ignore[attr-defined]
        return render(request, "runs/requests_table.html", {"run": run, "page": page})
    summary = run.summary or {}
    arm = ArmRef(run.arm.label, run.arm.position)
    gauges = gauges_figure([RunGauges(arm, run.pk, run.server or {})])
    return render(
        request,
        "runs/run.html",
        {
            "run": run,
            "page": page,
            "summary_rows": [
                {"key": k, "label": label, "unit": unit, "value": summary.get(k)}
                for k, label, unit in SUMMARY_KEYS
            ],
            "acceptance": run.acceptance or {},
            "report_json": json.dumps(run.engine_report or {}, indent=2)[:20_000],
            "gauges": gauges,
        },
    )


@login_required
@require_GET
def request_timeline(request: HttpRequest, run_id: int, index: int) -> JsonResponse:
    """One request's chunk timeline, with the same request (same prompt: the workload's
    index) in the other arms' runs of the same cell and repetition overlaid."""
    run = selectors.run_get(run_id=run_id)
    peers = list(
        Run.objects.filter(
            experiment_id=run.experiment_id,
            workload=run.workload,
            load=run.load,
            repetition=run.repetition,
        ).select_related("arm")
    )
    records = {
        r.run_id: r
        for r in RequestRecord.objects.filter(run__in=peers, index=index).only(
            "run_id", "index", "sent", "chunk_times", "chunk_tokens", "output_tokens"
        )
    }
    items = [
        TimelineRequest(
            ArmRef(p.arm.label, p.arm.position),
            p.pk,
            index,
            rec.sent if rec.sent is not None else (rec.chunk_times[0] if rec.chunk_times else 0.0),
            rec.chunk_times or [],
            rec.chunk_tokens,
            rec.output_tokens,
        )
        for p in sorted(peers, key=lambda p: p.arm.position)
        if (rec := records.get(p.pk)) is not None
    ]
    title = f"Chunk timeline · request {index} · {run.cell} rep {run.repetition}"
    return JsonResponse(timeline_figure(items, title=title))


@login_required
@require_GET
def run_vllm_json(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run in ``vllm bench serve --save-result --save-detailed``'s layout."""
    run = selectors.run_get(run_id=run_id)
    body = json.dumps(vllm_layout(run, selectors.run_timings(run_id=run.pk)))
    response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-vllm.json"'
    return response
