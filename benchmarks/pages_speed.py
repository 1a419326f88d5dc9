"""Experiment-page speed: server time (warm) and bytes transferred, on PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/sp_views_bench \\
        .venv/bin/python benchmarks/pages_speed.py [--requests 50000] [--chunks 64] [--experiment ID]

Builds (once; kept in the database) an experiment of 2 arms × 1 cell × 1 repetition with
``--requests`` requests per run (stored with the portal's binary COPY), precomputes its figures
the way the portal worker does when runs land (timed), then measures, warm, with Django's test
client (server time: no network, no browser):

* the experiment page's HTML, its workload and cell sections' figure JSON and the cell
  fragments (everything the page loads when scrolled to the end), median of ``--repeat``;
* the bytes a browser transfers for them, gzip-compressed as served (figure JSON is stored
  gzip'd; HTML and the site's CSS/JS gzip'd at level 6 as a front proxy or WhiteNoise would),
  Plotly's own script excluded (a cached static file);
* with ``--experiment ID``, the same for an existing experiment (the demo's, run against the
  same database with ``scripts/demo --exit-when-done``).

Targets (issue 12): ≤ 300 ms server time for the page, ≤ 2 MB compressed for the page and its
data. The ratio line compares the page with the site's smallest page (the hosts list) in the
same run, so a slow machine shows as a slow baseline too.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "specportal.settings")

NAME = "pages benchmark: 2 arms × {requests} requests"
TARGET_MS = 300.0
TARGET_BYTES = 2 * 1024 * 1024


def _records(n: int, chunks: int, tokens_per_chunk: int, gap: float, seed: int) -> Any:
    import numpy as np

    rng = np.random.default_rng(seed)
    for i in range(n):
        sent = i * 0.01
        ttft = 0.03 + rng.gamma(2.0, 0.02)
        gaps = rng.gamma(4.0, gap / 4.0, size=chunks - 1)
        times = (sent + ttft + np.concatenate([[0.0], np.cumsum(gaps)])).tolist()
        tokens = [tokens_per_chunk] * chunks
        yield {
            "index": i,
            "scheduled": sent,
            "sent": sent,
            "chunk_times": times,
            "chunk_tokens": tokens,
            "prompt_tokens": 256,
            "output_tokens": sum(tokens),
            "success": True,
            "finish_reason": "length",
            "category": "chat",
        }


def _build(requests: int, chunks: int) -> int:
    from django.contrib.auth.models import Group
    from django.db import transaction
    from django.utils import timezone

    from accounts import roles
    from configurations.services import configuration_create
    from experiments.models import Arm, Experiment
    from hosts.models import GpuHost
    from hosts.services import host_register
    from runs import ingest
    from runs.models import Run
    from specportal.metrics import Timing, summarize
    from tests.fixtures import BASELINE, NGRAM, OBJECTIVES

    name = NAME.format(requests=requests)
    existing = Experiment.objects.filter(name=name).first()
    if existing is not None:
        return existing.pk
    for role in roles.ALL_ROLES:
        Group.objects.get_or_create(name=role)
    baseline, _ = configuration_create(document=dict(BASELINE), name="bench baseline")
    ngram, _ = configuration_create(document=dict(NGRAM), name="bench ngram")
    host = GpuHost.objects.filter(name="bench-gpu").first() or host_register(
        name="bench-gpu",
        mode=GpuHost.Mode.MANAGED,
        emulated=True,
        gpu_model="H100",
        gpu_count=1,
        engines={"vllm": ["0.30.0"]},
    )
    with transaction.atomic():
        experiment = Experiment.objects.create(
            name=name,
            workloads=[{"name": "chat", "dataset_name": "bundled"}],
            loads=[{"name": "c32", "concurrency": 32, "requests": requests}],
            objectives=OBJECTIVES,
            repetitions=1,
            status=Experiment.Status.DONE,
            started_at=timezone.now(),
            finished_at=timezone.now(),
        )
        experiment.hosts.add(host)
        arms = [
            Arm.objects.create(
                experiment=experiment, position=0, label="baseline", configuration=baseline
            ),
            Arm.objects.create(
                experiment=experiment, position=1, label="ngram", configuration=ngram
            ),
        ]
    for position, arm in enumerate(arms):
        per_chunk = 1 if position == 0 else 3
        records = list(
            _records(requests, chunks // per_chunk, per_chunk, 0.012 * per_chunk**0.6, position)
        )
        timings = [
            Timing(r["sent"], r["chunk_times"], r["chunk_tokens"], r["output_tokens"], 256)
            for r in records
        ]
        duration = max(t.chunk_times[-1] for t in timings)
        with transaction.atomic():
            # As ingestion does: the records first, then the result (runs are append-only once
            # ``result_attempt`` is set: migration runs/0002).
            run = Run.objects.create(
                experiment=experiment,
                arm=arm,
                host=host,
                sequence=position + 1,
                workload="chat",
                load="c32",
                repetition=1,
                position=position + 1,
                estimated_seconds=duration,
                status=Run.Status.RUNNING,
                attempt=1,
            )
            ingest.copy_rows(ingest.record_rows(run.pk, records))
            Run.objects.filter(pk=run.pk).update(
                status=Run.Status.DONE,
                result_attempt=1,
                summary=summarize(timings, duration),
                acceptance={"per_position": [0.7, 0.5, 0.3], "num_drafts": requests * 10}
                if position
                else {},
                finished_at=timezone.now(),
                requests_total=requests,
                requests_failed=0,
            )
    return experiment.pk


def _precompute(experiment_id: int) -> float:
    from experiments.figures import experiment_figures_refresh
    from experiments.models import ExperimentFigures
    from runs.figures import run_figures_compute, run_samples_read
    from runs.models import Run

    ExperimentFigures.objects.filter(experiment_id=experiment_id).delete()
    t = time.perf_counter()
    samples = {}
    for run in Run.objects.filter(experiment_id=experiment_id, result_attempt__isnull=False):
        samples[run.pk] = run_samples_read(run_id=run.pk)
        run_figures_compute(run_id=run.pk, samples=samples[run.pk])
    experiment_figures_refresh(experiment_id=experiment_id, samples=samples)
    return time.perf_counter() - t


def _timed(client: Any, url: str, repeat: int, **headers: str) -> tuple[float, Any]:
    client.get(url, **headers)  # warm
    times, response = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        response = client.get(url, **headers)
        times.append((time.perf_counter() - t) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), response


def _measure(client: Any, experiment_id: int, repeat: int, label: str) -> bool:
    from django.contrib.staticfiles import finders

    from experiments.models import ExperimentFigures

    page_ms, page = _timed(client, f"/experiments/{experiment_id}/", repeat)
    html = gzip.compress(page.content, 6)
    sections = list(ExperimentFigures.objects.filter(experiment_id=experiment_id).only("section"))
    data_bytes = 0
    data_ms = []
    for s in sections:
        ms, r = _timed(
            client,
            f"/experiments/{experiment_id}/figures/{s.section}/figures.json",
            repeat,
            HTTP_ACCEPT_ENCODING="gzip",
        )
        data_bytes += len(r.content)
        data_ms.append(ms)
        if s.section.startswith("cell:"):
            ms, r = _timed(client, f"/experiments/{experiment_id}/figures/{s.section}/", repeat)
            data_bytes += len(gzip.compress(r.content, 6))
            data_ms.append(ms)
    static = 0
    for name in ("specportal/site.css", "specportal/figures.js", "django_htmx/htmx-2.min.js"):
        path = finders.find(name)
        static += len(gzip.compress(Path(str(path)).read_bytes(), 6))
    total = len(html) + data_bytes + static
    print(f"{label}:")
    print(f"  page HTML: {page_ms:.1f} ms server (median of {repeat}, warm), {len(html):,} B gzip")
    print(
        f"  {len(sections)} figure sections + cell fragments: slowest {max(data_ms):.1f} ms, "
        f"sum {sum(data_ms):.1f} ms, {data_bytes:,} B gzip"
    )
    print(f"  site CSS/JS + htmx: {static:,} B gzip (Plotly's script excluded)")
    print(f"  total transferred: {total:,} B ({total / 1024 / 1024:.2f} MB)")
    ok_ms, ok_bytes = page_ms <= TARGET_MS, total <= TARGET_BYTES
    print(f"  page ≤ {TARGET_MS:.0f} ms: {'met' if ok_ms else 'NOT met'} ({page_ms:.1f} ms)")
    print(
        f"  page + data ≤ 2 MB: {'met' if ok_bytes else 'NOT met'} ({total / 1024 / 1024:.2f} MB)"
    )
    return ok_ms and ok_bytes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--chunks", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--experiment", type=int, help="also measure this stored experiment")
    parser.add_argument("--no-precompute", action="store_true", help="reuse stored figures")
    parser.add_argument(
        "--only-experiment", action="store_true", help="measure --experiment alone (no synthetic)"
    )
    args = parser.parse_args()

    import django

    django.setup()
    import portal_db
    from django.conf import settings
    from django.test import Client

    from accounts.services import user_create_or_update

    if not portal_db.prepare():
        return 2
    settings.ALLOWED_HOSTS = ["*"]
    print(f"load average: {os.getloadavg()}")
    user = user_create_or_update(username="bench-viewer", password=None, role_names=["viewer"])
    client = Client()
    client.force_login(user)
    if args.only_experiment and args.experiment:
        baseline_ms, _ = _timed(client, "/hosts/", args.repeat)
        print(f"baseline page (hosts list): {baseline_ms:.1f} ms")
        if not args.no_precompute:
            print(
                f"precompute of experiment {args.experiment}: {_precompute(args.experiment):.1f} s"
            )
        ok = _measure(client, args.experiment, args.repeat, f"experiment {args.experiment}")
        page_ms, _ = _timed(client, f"/experiments/{args.experiment}/", args.repeat)
        print(f"ratio experiment page / hosts page: {page_ms / baseline_ms:.2f}")
        print(f"load average: {os.getloadavg()}")
        return 0 if ok else 1
    t = time.perf_counter()
    experiment_id = _build(args.requests, args.chunks)
    print(f"data: experiment {experiment_id} ready in {time.perf_counter() - t:.1f} s")
    if not args.no_precompute:
        seconds = _precompute(experiment_id)
        print(f"precompute (what the worker does when runs land): {seconds:.1f} s")
    baseline_ms, _ = _timed(client, "/hosts/", args.repeat)
    print(f"baseline page (hosts list): {baseline_ms:.1f} ms")
    ok = _measure(
        client, experiment_id, args.repeat, f"experiment of 2 arms × {args.requests:,} requests"
    )
    if args.experiment:
        if not args.no_precompute:
            print(
                f"precompute of experiment {args.experiment}: {_precompute(args.experiment):.1f} s"
            )
        ok = _measure(client, args.experiment, args.repeat, f"experiment {args.experiment}") and ok
    page_ms, _ = _timed(client, f"/experiments/{experiment_id}/", args.repeat)
    print(f"ratio experiment page / hosts page: {page_ms / baseline_ms:.2f}")
    print(f"load average: {os.getloadavg()}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
