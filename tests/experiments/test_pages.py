"""The site as a person uses it: Playwright in Debian's Chromium over a live server on
PostgreSQL, after an experiment really ran (a portal Celery worker ingests and precomputes the
figures, an agent on an emulated managed host launches ``specportal emulate`` and measures).

Every page opens with no console error and no request leaving the server; figures are checked
against the database (one trace per arm, plotted values equal to the stored ones); filters and
the compare picker change the view and the URL; the new-experiment form shows the API's field
error for a bad objective and starts a valid experiment whose page updates live as runs finish;
a viewer sees no write controls and is refused writes. Each page is saved as a screenshot under
``$SPECPORTAL_TEST_OUTPUT`` (default ``var/test-output/pages``).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import redis
from django.db import connections
from playwright.sync_api import Browser, Page, sync_playwright

from analysis.prefixcache import compare_arms
from experiments.models import Experiment, ExperimentFigures
from runs.models import RequestRecord, Run, RunFigures
from tests.fixtures import OBJECTIVES, Setup, api_as
from tests.harness import (
    Process,
    process_logs,
    redis_url_for_tests,
    start_agent,
    start_and_wait,
    start_portal_worker,
    use_broker,
    wait_for,
)
from verdicts.models import Verdict

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(600)]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
PASSWORD = "page-test-password"
OUTPUT = Path(os.environ.get("SPECPORTAL_TEST_OUTPUT", "var/test-output/pages"))

WORKLOAD = {"name": "chat", "dataset_name": "bundled", "category": "chat", "output_len": 24}
LOADS = [
    {"name": "c1", "concurrency": 1, "requests": 3},
    {"name": "c4", "concurrency": 4, "requests": 4},
]


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Browser]:
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        yield launched
        launched.close()
        connections.close_all()  # see tests/experiments/test_inventory_integration.py


@pytest.fixture
def site(setup: Setup, live_server: Any, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A finished two-arm experiment (2 loads, 1 repetition) and the processes that ran it,
    kept running for the experiments the test starts itself."""
    broker = redis_url_for_tests()
    redis.Redis.from_url(broker).flushdb()
    use_broker(broker)
    processes: list[Process] = [
        start_portal_worker(broker, tmp_path),
        start_agent("gpu-a", setup.tokens["gpu-a"], live_server.url, broker, tmp_path),
    ]
    try:
        api = api_as(setup.experimenter)
        created = api.post(
            "/api/v1/experiments/",
            {
                "name": "page check",
                "baseline": setup.baseline.pk,
                "candidates": [setup.ngram.pk],
                "labels": ["baseline", "ngram"],
                "workloads": [WORKLOAD],
                "loads": LOADS,
                "objectives": copy.deepcopy(OBJECTIVES),
                "hosts": ["gpu-a"],
                "repetitions": 1,
            },
            format="json",
        )
        assert created.status_code == 201, created.json()
        experiment = start_and_wait(api, int(created.json()["id"]), processes, 240)
        assert experiment.status == Experiment.Status.DONE, process_logs(processes)()
        # the worker precomputes figures right after each ingest
        wait_for(
            lambda: (
                ExperimentFigures.objects.filter(experiment=experiment).count() == 3
                and RunFigures.objects.filter(run__experiment=experiment).count() == 4
            ),
            60,
            "the figures of every section and run",
            process_logs(processes),
        )
        # ...and recomputes the verdict when a run lands: the walk reads the one on all four runs
        wait_for(
            lambda: any(len(v.inputs) == 4 for v in Verdict.objects.filter(experiment=experiment)),
            60,
            "the verdict on every run",
            process_logs(processes),
        )
        for user in (setup.viewer, setup.experimenter):
            user.set_password(PASSWORD)
            user.save()
        yield {"experiment": experiment, "processes": processes, "url": live_server.url}
    finally:
        for process in processes:
            process.stop()
        redis.Redis.from_url(broker).flushdb()


class Watch:
    """Console errors and requests that leave the server, for one page."""

    def __init__(self, page: Page, origin: str) -> None:
        self.errors: list[str] = []
        self.outside: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on(
            "request",
            lambda r: (
                None
                if r.url.startswith((origin, "data:", "blob:", "about:"))
                else self.outside.append(r.url)
            ),
        )

    def check(self, where: str, *, expected: str = "") -> None:
        """No console error (but ``expected``, e.g. the 400 a bad objective is meant to get)."""
        errors = [e for e in self.errors if not (expected and expected in e)]
        assert errors == [], (where, errors)
        assert self.outside == [], (where, self.outside)
        self.errors.clear()


def login(browser: Browser, url: str, username: str, *, height: int = 900) -> tuple[Page, Watch]:
    """A new page logged in as ``username`` (the walks' shared password), watched for errors."""
    page = browser.new_page(viewport={"width": 1360, "height": height})
    watch = Watch(page, url)
    page.goto(f"{url}/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("header.site nav")
    return page, watch


def _shot(page: Page, name: str) -> None:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUTPUT / f"{name}.png"), full_page=True)


def _traces(page: Page, selector: str) -> list[dict[str, Any]]:
    page.wait_for_function(
        f"() => {{ const el = document.querySelector({json.dumps(selector)}); "
        "return el && el.data && el.data.length > 0; }",
        timeout=20_000,
    )
    traces: list[dict[str, Any]] = page.eval_on_selector(
        selector,
        "el => el.data.map(t => ({name: t.meta ? t.meta[0] : t.name, x: Array.from(t.x || []),"
        " y: Array.from(t.y || []), text: t.text ? Array.from(t.text) : []}))",
    )
    return traces


def _ttfts_ms(runs: list[Run]) -> list[float]:
    out = []
    for record in RequestRecord.objects.filter(run__in=runs, success=True):
        if record.chunk_times:
            out.append((record.chunk_times[0] - record.sent) * 1000)
    return out


def test_pages_as_a_viewer_and_an_experimenter_would_use_them(
    setup: Setup, browser: Browser, site: dict[str, Any]
) -> None:
    experiment: Experiment = site["experiment"]
    url: str = site["url"]
    runs = list(experiment.runs.select_related("arm", "host").order_by("sequence"))
    assert len(runs) == 4
    verdict = Verdict.objects.filter(experiment=experiment).latest("id").document
    # one repetition per arm cannot reach any test's level: the worker's verdict says so
    [candidate] = verdict["candidates"]
    assert candidate["state"] == "INCONCLUSIVE"
    cell_states = {
        cell["load"]: entry["state"] for cell in verdict["cells"] for entry in cell["candidates"]
    }

    # --- a viewer: home, list, experiment page (verdict first), cells, runs, compare -----------
    page, watch = login(browser, url, "victor")
    assert page.locator("#home-finished tr[data-experiment]").count() == 1
    assert "gpu-a" in page.inner_text("#home-hosts")
    assert page.locator("#home-new-experiment, #nav-new-experiment").count() == 0  # no writes
    _shot(page, "home")
    watch.check("home")

    page.goto(f"{url}/experiments/")
    assert page.locator("#experiments tr[data-experiment]").count() == 1
    page.select_option("select[name=state]", "running")
    page.click("#apply-filters")
    page.wait_for_load_state()
    assert parse_qs(urlparse(page.url).query)["state"] == ["running"]
    assert page.locator("#experiments tr[data-experiment]").count() == 0
    page.select_option("select[name=state]", "done")
    page.select_option("select[name=verdict]", "pending")
    page.click("#apply-filters")
    page.wait_for_load_state()
    assert page.locator("#experiments tr[data-experiment]").count() == 0  # it has a verdict
    page.select_option("select[name=verdict]", "INCONCLUSIVE")
    page.click("#apply-filters")
    page.wait_for_load_state()
    assert parse_qs(urlparse(page.url).query)["verdict"] == ["INCONCLUSIVE"]
    row = page.locator("#experiments tr[data-experiment]")
    assert row.count() == 1
    assert "INCONCLUSIVE" in row.inner_text()
    _shot(page, "experiments-list")
    watch.check("experiments list")

    page.goto(f"{url}/experiments/{experiment.pk}/")
    page.wait_for_selector("#verdicts")
    # the verdict block comes before any figure, and shows the stored verdict with what it needs
    order = page.evaluate(
        "() => [document.querySelector('#verdicts').getBoundingClientRect().top,"
        " document.querySelector('#arms').getBoundingClientRect().top]"
    )
    assert order[0] < order[1]
    assert page.locator("#verdict-pending").count() == 0
    badge = page.locator("#verdicts [data-candidate=ngram] h3 [data-state]")
    assert badge.inner_text() == "INCONCLUSIVE"
    assert page.locator("#cell-verdicts tr[data-cell]").count() == 2
    assert "new experiment" in page.inner_text("#more-runs-caveat")
    assert "emulated: demonstrates SpecPortal, not evidence" in page.inner_text("#verdicts")
    assert experiment.objectives_hash in page.inner_text("#objectives-lock")
    assert page.inner_text("#progress") == "4 / 4"
    # the arms' configuration diff, as JSON-Pointer paths
    diff_paths = page.locator("#arms .arm-diff td.path").all_inner_texts()
    assert diff_paths
    assert all(p.startswith("/proposal") for p in diff_paths), diff_paths
    # runs in execution order, as stored
    shown = page.locator("#runs tr[data-sequence]").evaluate_all(
        "rows => rows.map(r => [Number(r.dataset.sequence), r.dataset.status, r.cells[4].innerText])"
    )
    assert shown == [[r.sequence, "done", r.arm.label] for r in runs]
    assert page.locator("#run-again").count() == 0  # a viewer gets no write controls
    # load curves: one trace per arm, the median output throughput of each arm's runs
    # figures load when their section scrolls into view (the verdict block above is tall)
    page.locator("#section-chat").scroll_into_view_if_needed()
    curve = _traces(page, "#section-chat [data-figure=load_output_throughput] .plot")
    assert [t["name"] for t in curve] == ["baseline", "ngram"]
    for trace in curve:
        stored = {
            r.load: (r.summary or {})["output_throughput"]
            for r in runs
            if r.arm.label == trace["name"]
        }
        assert trace["x"] == [1, 4]
        assert trace["y"] == pytest.approx([stored["c1"], stored["c4"]], rel=1e-6)
    assert curve[1]["text"] == [cell_states["c1"], cell_states["c4"]]
    pareto = _traces(page, "#section-chat [data-figure=pareto] .plot")
    assert [t["name"] for t in pareto] == ["baseline", "ngram"]
    # a cell below the fold loads when scrolled to: ECDF maxima are the stored maxima
    page.locator("#cell-chatc4").scroll_into_view_if_needed()
    for cell, anchor in (("c1", "#cell-chatc1"), ("c4", "#cell-chatc4")):
        page.locator(anchor).scroll_into_view_if_needed()
        # the cell's section arrives when revealed; its figures load when they scroll into view
        page.locator(f"{anchor} .figure-grid").scroll_into_view_if_needed()
        traces = _traces(page, f"{anchor} [data-figure=ecdf_ttft] .plot")
        assert [t["name"] for t in traces] == ["baseline", "ngram"]
        for trace in traces:
            mine = [r for r in runs if r.arm.label == trace["name"] and r.load == cell]
            ttfts = sorted(_ttfts_ms(mine))
            assert trace["x"] == pytest.approx(ttfts, rel=1e-6)  # few samples: all kept
            assert trace["y"][-1] == 1.0
        for name in ("ecdf_tpot", "ecdf_itl", "ecdf_e2el", "tokens_per_chunk"):
            assert [t["name"] for t in _traces(page, f"{anchor} [data-figure={name}] .plot")] == [
                "baseline",
                "ngram",
            ], name
        acceptance = _traces(page, f"{anchor} [data-figure=acceptance] .plot")
        assert [t["name"] for t in acceptance] == ["ngram"]
        # the tail table shows each run's p99 TTFT (one run per arm: the median is that run's)
        for run in (r for r in runs if r.load == cell):
            text = page.locator(
                f"{anchor} table.tail tr:has-text('{run.arm.label}') td[data-key=p99_ttft_ms]"
            ).first.inner_text()
            assert text.split()[0] == f"{(run.summary or {})['p99_ttft_ms']:.2f}", (
                cell,
                run.arm.label,
            )
        # the prefix-cache flag, exactly when the arms' stored fractions disagree
        rates = {r.arm.label: r.prefix_cache_hit_fraction for r in runs if r.load == cell}
        flagged = page.locator(f"{anchor} .prefix-cache-flag").count() > 0
        assert flagged == compare_arms(rates).flagged
    _shot(page, "experiment")
    # the table behind a figure, as CSV
    csv = page.request.get(
        f"{url}/experiments/{experiment.pk}/figures/workload:chat/load_output_throughput.csv"
    )
    assert csv.ok
    assert csv.text().splitlines()[0].startswith("arm,load,x,metric,value")
    watch.check("experiment page")

    page.goto(f"{url}/experiments/{experiment.pk}/cells/chat/c4/")
    traces = _traces(page, "#cell-large [data-figure=ecdf_e2el] .plot")
    assert [t["name"] for t in traces] == ["baseline", "ngram"]
    per_run = page.locator("#per-run tbody tr").count()
    assert per_run == 2
    _shot(page, "cell")
    watch.check("cell page")

    run = next(r for r in runs if r.arm.label == "ngram" and r.load == "c4")
    page.goto(f"{url}/runs/{run.pk}/")
    assert (
        page.locator("#requests tr[data-index]").count()
        == RequestRecord.objects.filter(run=run).count()
    )
    shown_p99 = page.locator("#run-summary tr[data-key=p99_ttft_ms] td.num").inner_text()
    assert shown_p99.split()[0] == f"{(run.summary or {})['p99_ttft_ms']:.3f}"
    gauges = _traces(page, "#run-gauges .plot")
    assert {t["name"] for t in gauges} == {"ngram"}
    page.click("#requests tr[data-index='0'] a[data-timeline]")
    timeline = _traces(page, "#timeline .plot")
    assert [t["name"] for t in timeline] == ["baseline", "ngram"]  # same prompt, both arms
    record = RequestRecord.objects.get(run=run, index=0)
    ngram_steps = timeline[1]
    assert len(ngram_steps["x"]) == len(record.chunk_times) + 1  # one step per chunk
    assert ngram_steps["y"][-1] == sum(record.chunk_tokens or [1] * len(record.chunk_times))
    jsonl = page.request.get(f"{url}/api/v1/runs/{run.pk}/requests.jsonl")
    assert jsonl.ok
    assert len(jsonl.text().splitlines()) == len(page.locator("#requests tr[data-index]").all())
    vllm = page.request.get(f"{url}/runs/{run.pk}/vllm.json").json()
    assert vllm["p99_ttft_ms"] == pytest.approx((run.summary or {})["p99_ttft_ms"])
    assert len(vllm["ttfts"]) == RequestRecord.objects.filter(run=run).count()
    _shot(page, "run")
    watch.check("run page")

    page.goto(f"{url}/compare/")
    assert page.locator("#compare-too-few").count() == 1
    a, b = (r for r in runs if r.load == "c1")
    page.select_option("select[name=run]", [str(a.pk), str(b.pk)])
    page.click("#compare-apply")
    page.wait_for_selector("#compare-items")
    assert sorted(parse_qs(urlparse(page.url).query)["run"]) == sorted([str(a.pk), str(b.pk)])
    traces = _traces(page, "#compare-ecdf_ttft .plot")
    assert len(traces) == 2
    for run_ in (a, b):
        trace = next(t for t in traces if t["name"].startswith(f"run {run_.pk} "))
        assert trace["x"] == pytest.approx(
            RunFigures.objects.get(run=run_).data["curves"]["ttft"]["x"]
        )
    assert page.locator("#compare-items tbody tr").count() == 2
    _shot(page, "compare")
    # an arm of a cell works the same way, and a link reproduces the view
    page.goto(
        f"{url}/compare/?arm={experiment.pk}:baseline:chat/c4&arm={experiment.pk}:ngram:chat/c4"
    )
    assert len(_traces(page, "#compare-ecdf_e2el .plot")) == 2
    watch.check("compare page")

    page.goto(f"{url}/configurations/{setup.ngram.pk}/")
    assert "page check" in page.inner_text("#used-by")
    _shot(page, "configuration")
    watch.check("configuration page")

    # a viewer is refused writes, in the browser's own session
    assert page.goto(f"{url}/experiments/new/").status == 403  # type: ignore[union-attr]
    refused = page.request.post(
        f"{url}/api/v1/experiments/{experiment.pk}/cancel/",
        headers={
            "X-CSRFToken": next(
                c["value"] for c in page.context.cookies() if c["name"] == "csrftoken"
            )
        },
    )
    assert refused.status == 403
    page.close()

    # --- an experimenter: a bad objective, then a valid experiment, watched live ---------------
    page, watch = login(browser, url, "alice")
    page.click("#nav-new-experiment")
    page.wait_for_selector("#objectives-status:has-text('valid')")
    page.fill("input[name=name]", "live check")
    page.select_option("select[name=baseline]", str(setup.baseline.pk))
    page.select_option("select[name=candidates]", [str(setup.ngram.pk)])
    page.select_option("select[name=hosts]", ["gpu-a"])
    page.fill("input[name=labels]", "baseline, ngram")
    page.fill("input[name=repetitions]", "1")
    page.fill("textarea[name=workloads]", json.dumps([WORKLOAD]))
    page.fill("textarea[name=loads]", json.dumps([{"name": "c1", "concurrency": 1, "requests": 3}]))
    bad = copy.deepcopy(OBJECTIVES)
    bad["objectives"][0]["threshold"] = "fast"
    page.fill("textarea[name=objectives]", json.dumps(bad))
    error = page.wait_for_selector("#objectives-errors li[data-path^='objectives.objectives.0']")
    assert error is not None
    assert "threshold" in (error.get_attribute("data-path") or "")
    assert page.inner_text("#objectives-status") == "not valid"
    _shot(page, "new-experiment-invalid")
    watch.check("new experiment, bad objective", expected="status of 400")
    page.fill("textarea[name=objectives]", json.dumps(OBJECTIVES))
    page.wait_for_selector("#objectives-status:has-text('valid ·')")
    page.click("#create-plan")
    page.wait_for_selector("#plan-summary:has-text('runs, estimated')")
    assert page.inner_text("#plan-summary").startswith("2 runs")
    _shot(page, "new-experiment-plan")
    page.click("#start-experiment")
    page.wait_for_selector("#experiment-name:has-text('live check')")
    new = Experiment.objects.get(name="live check")
    assert new.status == Experiment.Status.RUNNING
    # the page updates itself as runs finish (htmx), without a reload
    page.evaluate("() => { window.__notReloaded = true; }")
    page.wait_for_function(
        "() => document.querySelector('#progress').innerText === '2 / 2'", timeout=180_000
    )
    page.wait_for_function(
        "() => document.querySelector('#experiment-status').innerText === 'done'", timeout=60_000
    )
    assert page.evaluate("() => window.__notReloaded") is True
    statuses = page.locator("#runs tr[data-sequence]").evaluate_all(
        "rows => rows.map(r => r.dataset.status)"
    )
    assert statuses == ["done", "done"]
    # and its load curves appear once computed, with the stored numbers
    new_runs = list(new.runs.select_related("arm").order_by("arm__position"))
    page.wait_for_function(
        "() => { const el = document.querySelector("
        "'#section-chat [data-figure=load_output_throughput] .plot');"
        " return el && el.data && el.data.length === 2 && el.data.every(t => t.y.length === 1); }",
        timeout=30_000,
    )
    traces = _traces(page, "#section-chat [data-figure=load_output_throughput] .plot")
    assert [t["y"][0] for t in traces] == pytest.approx(
        [(r.summary or {})["output_throughput"] for r in new_runs], rel=1e-6
    )
    _shot(page, "experiment-live")
    watch.check("experimenter pages")
    page.close()
