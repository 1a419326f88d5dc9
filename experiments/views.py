"""Server-rendered experiment pages: the list, one experiment (verdict first), a cell, the
comparison of any runs or arms, and the new-experiment form. Reads only: writes go through the
API (the form posts to it), so a page never holds a second copy of a rule."""

from __future__ import annotations

import gzip
import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from accounts import roles
from accounts.selectors import user_has_role
from analysis.figures import ECDF_METRICS, TAIL_STATISTICS, arm_colour, rows_to_csv
from analysis.prefixcache import PREFIX_CACHE_TOLERANCE
from configurations.models import FrozenConfiguration
from experiments import compare as comparing
from experiments import selectors
from experiments.figures import sections_list, table_unpack
from experiments.models import Experiment, ExperimentFigures
from experiments.planning import estimated_wall_seconds
from experiments.verdicts import cell_verdict, experiment_verdict, verdict_view
from hosts.models import GpuHost
from runs.models import Run
from specportal.engines.document import diff
from specportal.engines.flags import ENGINES

PAGE_SIZE = 25
LIST_FILTERS = ("state", "verdict", "engine", "method", "target", "host", "label", "from", "to")


@login_required
def experiment_list_page(request: HttpRequest) -> HttpResponse:
    """Every experiment, filtered and sorted by the query string (so a link keeps the view)."""
    filters = {key: request.GET.get(key, "").strip() for key in (*LIST_FILTERS, "sort")}
    experiments: Any = selectors.experiment_filtered(filters=filters)
    if filters["verdict"]:
        experiments = selectors.experiment_rows_filtered(
            experiments[:1000], verdict=filters["verdict"]
        )
    page = Paginator(experiments, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "rows": selectors.experiment_rows(page.object_list),
        "page": page,
        "filters": filters,
        "query": query.urlencode(),
        "states": [s.value for s in Experiment.Status],
        "verdicts": ["KEEP", "DROP", "INCONCLUSIVE", "pending"],
        "engines": ENGINES,
        "methods": sorted(set(FrozenConfiguration.objects.values_list("method", flat=True))),
        "hosts": list(GpuHost.objects.order_by("name").values_list("name", flat=True)),
        "sorts": list(selectors.EXPERIMENT_SORTS),
    }
    return render(request, "experiments/experiment_list.html", context)


def _finished(runs: list[Run]) -> int:
    return sum(1 for r in runs if r.status in selectors.FINISHED_RUN_STATES)


def _arms(experiment: Experiment) -> list[dict[str, Any]]:
    arms = sorted(experiment.arms.all(), key=lambda a: a.position)
    baseline = arms[0].configuration.document if arms else {}
    return [
        {
            "arm": arm,
            "colour": arm_colour(arm.position),
            "diff": [
                {
                    "path": d["path"],
                    "baseline": json.dumps(d["left"]) if "left" in d else "(absent)",
                    "value": json.dumps(d["right"]) if "right" in d else "(absent)",
                }
                for d in diff(baseline, arm.configuration.document)
            ]
            if arm.position
            else [],
        }
        for arm in arms
    ]


def _sections(experiment: Experiment) -> list[dict[str, Any]]:
    """Per workload: its section (load curves) and its cells' sections, in page order."""
    stored = {s.section: s for s in sections_list(experiment=experiment)}
    out = []
    for workload in experiment.workloads:
        name = workload["name"]
        out.append(
            {
                "workload": name,
                "section": stored.get(f"workload:{name}"),
                "section_name": f"workload:{name}",
                "cells": [
                    {
                        "cell": f"{name}/{load['name']}",
                        "load": load["name"],
                        "section": stored.get(f"cell:{name}/{load['name']}"),
                        "section_name": f"cell:{name}/{load['name']}",
                    }
                    for load in experiment.loads
                ],
            }
        )
    return out


def _experiment_context(experiment: Experiment) -> dict[str, Any]:
    runs = selectors.experiment_page_runs(experiment=experiment)
    arms = _arms(experiment)
    hosts = sorted(experiment.hosts.all(), key=lambda h: h.name)
    verdict = experiment_verdict(experiment)
    view = verdict_view(
        verdict,
        arms=[a["arm"].label for a in arms],
        workloads=[w["name"] for w in experiment.workloads],
        loads=[load["name"] for load in experiment.loads],
    )
    return {
        "experiment": experiment,
        "runs": runs,
        "finished": _finished(runs),
        "estimated_seconds": estimated_wall_seconds(runs),
        "arms": arms,
        "hosts": hosts,
        "emulated": any(h.emulated for h in hosts) or view["emulated"],
        "verdict": view,
        "sections": _sections(experiment),
        "mismatched_runs": [r for r in runs if r.mismatches],
        "workload_figures": WORKLOAD_FIGURES,
        "live": experiment.status in (Experiment.Status.RUNNING, Experiment.Status.DRAFT)
        and experiment.started_at is not None,
        "objectives_json": json.dumps(experiment.objectives, indent=2),
        "prefix_cache_tolerance": PREFIX_CACHE_TOLERANCE,
        "family": selectors.experiment_family(experiment=experiment),
    }


@login_required
def experiment_page(request: HttpRequest, experiment_id: int) -> HttpResponse:
    """Verdicts first; then arms and their diff, figures per workload and cell, the runs in
    execution order, lint findings and self-report mismatches."""
    experiment = selectors.experiment_get(experiment_id=experiment_id)
    context = _experiment_context(experiment)
    context["can_run_again"] = user_has_role(request.user, roles.EXPERIMENTER)
    return render(request, "experiments/experiment.html", context)


@login_required
def experiment_live(request: HttpRequest, experiment_id: int) -> HttpResponse:
    """The parts of a running experiment's page that change (htmx polls it): progress, the
    verdict block, the runs, and each figure section's version (the page redraws a figure only
    when its section's version moved)."""
    experiment = selectors.experiment_get(experiment_id=experiment_id)
    context = _experiment_context(experiment)
    # the verdict block's follow-up button, as on the full page
    context["can_run_again"] = user_has_role(request.user, roles.EXPERIMENTER)
    return render(request, "experiments/experiment_live.html", context)


def _section(experiment_id: int, section: str, *fields: str) -> ExperimentFigures:
    qs = ExperimentFigures.objects.filter(experiment_id=experiment_id, section=section)
    return get_object_or_404(qs.only("pk", "experiment_id", "section", "version", *fields))


@login_required
@require_GET
def section_figures(request: HttpRequest, experiment_id: int, section: str) -> HttpResponse:
    """A section's figures as stored: gzip'd JSON sent as it is (computed when runs landed)."""
    stored = _section(experiment_id, section, "figures_gzip")
    body = bytes(stored.figures_gzip)
    etag = f'"{stored.version}"'
    if request.headers.get("If-None-Match") == etag:
        return HttpResponse(status=304)
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        response = HttpResponse(body, content_type="application/json")
        response["Content-Encoding"] = "gzip"
    else:
        response = HttpResponse(gzip.decompress(body), content_type="application/json")
    response["ETag"] = etag
    response["Vary"] = "Accept-Encoding"
    response["Cache-Control"] = "private, no-cache"
    return response


@login_required
@require_GET
def section_csv(request: HttpRequest, experiment_id: int, section: str, name: str) -> HttpResponse:
    """The table behind one figure of a section, as CSV."""
    stored = _section(experiment_id, section, "rows", "tail")
    if name == "tail":
        columns = [
            "metric",
            "statistic",
            "key",
            "arm",
            "aggregate",
            "value_ms",
            "runs",
            "low_ms",
            "high_ms",
            "level",
            "method",
            "ratio_to_baseline",
            "ratio_low",
            "ratio_high",
        ]
        rows = [{c: row.get(c) for c in columns} for row in stored.tail]
    else:
        table = (stored.rows or {}).get(name)
        if table is None:
            raise Http404("no such figure")
        rows = table_unpack(table)
    response = HttpResponse(rows_to_csv(rows), content_type="text/csv; charset=utf-8")
    filename = f"experiment-{experiment_id}-{stored.name.replace('/', '-')}-{name}.csv"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
def cell_fragment(request: HttpRequest, experiment_id: int, section: str) -> HttpResponse:
    """One cell's section of the experiment page, loaded when it scrolls into view (and again
    by a live update when its version moves)."""
    experiment = selectors.experiment_get(experiment_id=experiment_id)
    if not section.startswith("cell:"):
        raise Http404("not a cell")
    stored = (
        ExperimentFigures.objects.filter(experiment=experiment, section=section)
        .only("pk", "experiment_id", "section", "version", "tail")
        .first()
    )
    return render(
        request, "experiments/cell_section.html", _cell_context(experiment, section[5:], stored)
    )


def _tail_table(rows: list[dict[str, Any]], colours: dict[str, str]) -> list[dict[str, Any]]:
    """Tail rows (one per metric, statistic and arm) as a table of one line per metric and arm,
    its statistics side by side in ``TAIL_STATISTICS`` order."""
    table: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        if row["metric"] not in TAIL_METRIC_LABELS:
            continue
        entry = table.setdefault(
            (row["metric"], row["arm"]),
            {
                "metric": row["metric"],
                "metric_label": TAIL_METRIC_LABELS[row["metric"]],
                "arm": row["arm"],
                "colour": colours.get(row["arm"]),
                "runs": row["runs"],
                "values": [],
            },
        )
        entry["values"].append(row)
    return list(table.values())


def _cell_context(
    experiment: Experiment, cell: str, section: ExperimentFigures | None
) -> dict[str, Any]:
    arms = sorted(experiment.arms.all(), key=lambda a: a.position)
    view = verdict_view(
        experiment_verdict(experiment),
        arms=[a.label for a in arms],
        workloads=[w["name"] for w in experiment.workloads],
        loads=[load["name"] for load in experiment.loads],
    )
    tail = section.tail if section is not None else []
    colours = {a.label: arm_colour(a.position) for a in arms}
    workload, _, load = cell.partition("/")
    # Only what the cell shows: a run's /metrics scrapes and engine report are tens of kB each.
    runs = list(
        Run.objects.filter(experiment=experiment, workload=workload, load=load)
        .select_related("arm")
        .only(
            "experiment_id",
            "arm__label",
            "arm__position",
            "repetition",
            "summary",
            "prefix_cache_hit_fraction",
        )
        .order_by("arm__position", "repetition")
    )
    return {
        "experiment": experiment,
        "section": section,
        "section_name": f"cell:{cell}",
        "cell": cell,
        "tail_table": _tail_table(tail, colours),
        "tail_statistics": TAIL_STATISTICS,
        "prefix_cache": selectors.prefix_cache_blocks(
            {(r.repetition, r.arm.label): r.prefix_cache_hit_fraction for r in runs if r.summary},
            [a.label for a in arms],
        ),
        # Each arm's hit fractions by repetition, shown with the flag so the reader sees which
        # arm was served from cache.
        "prefix_cache_by_arm": [
            {
                "arm": a.label,
                "fractions": [
                    r.prefix_cache_hit_fraction for r in runs if r.summary and r.arm_id == a.pk
                ],
            }
            for a in arms
        ],
        "run_rows": [
            {"run": r, "values": [(r.summary or {}).get(k) for k in PER_RUN_KEYS]}
            for r in runs
            if r.summary
        ],
        "per_run_keys": PER_RUN_KEYS,
        "per_run_columns": [(k, PER_RUN_HEADERS[k]) for k in PER_RUN_KEYS],
        "verdict": cell_verdict(view, cell),
        "runs": runs,
        "figure_names": CELL_FIGURES,
        "prefix_cache_tolerance": PREFIX_CACHE_TOLERANCE,
    }


# The tail table's metric names as the figures title them (stored rows keep vLLM's short keys).
TAIL_METRIC_LABELS = {metric: names[0] for metric, names in ECDF_METRICS.items()}
CELL_FIGURES = (
    ("ecdf_ttft", "TTFT"),
    ("ecdf_tpot", "TPOT"),
    ("ecdf_itl", "chunk gap (ITL)"),
    ("ecdf_e2el", "E2E latency"),
    ("tokens_per_chunk", "tokens per chunk"),
    ("acceptance", "acceptance per position"),
)
WORKLOAD_FIGURES = (
    ("load_output_throughput", "output throughput"),
    ("load_p99_ttft_ms", "p99 TTFT"),
    ("load_p99_tpot_ms", "p99 TPOT"),
    ("load_slo_attainment", "SLO attainment"),
    ("pareto", "Pareto"),
    ("speedup", "predicted vs measured"),
)


@login_required
def cell_page(request: HttpRequest, experiment_id: int, cell: str) -> HttpResponse:
    """Every figure of one workload × load large, with the per-run values behind each aggregate."""
    experiment = selectors.experiment_get(experiment_id=experiment_id)
    cells = {
        f"{w['name']}/{load['name']}" for w in experiment.workloads for load in experiment.loads
    }
    if cell not in cells:
        raise Http404("no such cell")
    stored = (
        ExperimentFigures.objects.filter(experiment=experiment, section=f"cell:{cell}")
        .only("pk", "experiment_id", "section", "version", "tail")
        .first()
    )
    context = _cell_context(experiment, cell, stored)
    context["large"] = True
    return render(request, "experiments/cell.html", context)


# The per-run table's headers: the summary key's meaning and unit (the key is the title text).
PER_RUN_HEADERS = {
    "p50_ttft_ms": "p50 TTFT (ms)",
    "p99_ttft_ms": "p99 TTFT (ms)",
    "median_tpot_ms": "median TPOT (ms)",
    "p99_tpot_ms": "p99 TPOT (ms)",
    "p99_itl_ms": "p99 chunk gap (ms)",
    "p99_e2el_ms": "p99 E2E (ms)",
    "output_throughput": "output (tokens/s)",
    "slo_attainment": "SLO attainment",
    "mean_tokens_per_chunk": "tokens per chunk",
}
PER_RUN_KEYS = (
    "p50_ttft_ms",
    "p99_ttft_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "p99_itl_ms",
    "p99_e2el_ms",
    "output_throughput",
    "slo_attainment",
    "mean_tokens_per_chunk",
)


@login_required
def compare_page(request: HttpRequest) -> HttpResponse:
    """Any 2–8 runs or arms side by side: ``?run=12&run=40`` or ``?arm=<experiment>:<label>:<cell>``;
    the URL is the state, so a link reproduces the view."""
    picked = comparing.parse_picks(request.GET.getlist("run"), request.GET.getlist("arm"))
    context = comparing.compare_context(picked)
    context["choices"] = comparing.choices()
    context["tail_table"] = _tail_table(
        context["tail"], {item["pick"].label: item["colour"] for item in context.get("items", [])}
    )
    context["tail_statistics"] = TAIL_STATISTICS
    return render(request, "experiments/compare.html", context)


@login_required
def experiment_new_page(request: HttpRequest) -> HttpResponse:
    """The new-experiment form (experimenters only): from scratch, or "run again / change one
    thing" from ``?from=<id>``. It posts to the API and shows the API's field errors."""
    if not user_has_role(request.user, roles.EXPERIMENTER):
        raise PermissionDenied("creating experiments needs the experimenter role")
    source = None
    if (from_id := request.GET.get("from", "")).isdecimal():
        source = get_object_or_404(Experiment, pk=int(from_id))
    configurations = list(FrozenConfiguration.objects.order_by("-id")[:300])
    hosts = list(GpuHost.objects.order_by("name"))
    initial = comparing.new_experiment_initial(source)
    return render(
        request,
        "experiments/experiment_new.html",
        {
            "source": source,
            "configurations": configurations,
            "hosts": hosts,
            "initial": initial,
            "initial_json": json.dumps(initial),
        },
    )
