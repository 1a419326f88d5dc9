"""``specportal compare``: benchstat for speculative decoding, on result files, without a portal.

    specportal compare --objectives OBJ.json baseline=a.json,b.json eagle3=c.json,d.json [--json]

The first arm is the baseline; each run in a file is one repetition (one file per run, or a file
of several runs, as ``vllm bench serve --append-result`` writes). Files are read by
``specportal.formats`` (SpecPortal's own result file, ``vllm bench serve --save-result`` in both
layouts, and the other tools it knows). One cell per call: ``--cell WORKLOAD/LOAD`` names it for
objectives scoped to loads or workloads (by default the load is ``c<N>`` from the files'
concurrency, the workload ``default``). The verdict is ``analysis.verdict``'s, the same engine the
portal runs, printed as a table (or its JSON with ``--json``).

Exit status: 0 every candidate keeps, 1 any drops, 3 none drops and any is inconclusive (or has
no objective in scope), 2 bad input (one line on stderr). Needs only the small install plus
``specportal[analysis]`` (numpy, scipy): no Django.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specportal.cli import CliError

HELP = "decide KEEP, DROP or INCONCLUSIVE from result files and objectives (one cell)"

_ARM = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]{0,99})=(.+)$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--objectives",
        required=True,
        metavar="OBJ.json",
        help="objectives document (schema 1 or 2)",
    )
    parser.add_argument(
        "arms",
        nargs="*",
        metavar="ARM=FILE[,FILE...]",
        help="an arm's result files, one run each (the first arm is the baseline)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the verdict document (analysis/VERDICT.md)"
    )
    parser.add_argument(
        "--cell", metavar="WORKLOAD/LOAD", help="the cell's names, for scoped objectives"
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="ARM=CONFIG.json",
        help="an arm's frozen configuration (K in force, method, temperature for the text guard)",
    )
    parser.add_argument(
        "--plan",
        action="store_true",
        help="only say how many repetitions per arm the family needs to decide at all "
        "(needs --candidates, no files)",
    )
    parser.add_argument("--candidates", type=int, default=None, help="with --plan: candidate arms")
    parser.add_argument(
        "--emulated", action="store_true", help="label the verdict as measured on emulated hosts"
    )


def _read_json(path: str, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError(f"{what} {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{what} {path}: cannot be read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise CliError(f"{what} {path}: not JSON (line {exc.lineno}: {exc.msg})") from None


def _objectives(path: str) -> dict[str, Any]:
    from analysis.objectives import ObjectivesError, validate_objectives

    try:
        return validate_objectives(_read_json(path, "objectives"))
    except ObjectivesError as exc:
        field, messages = next(iter(exc.fields.items()))
        raise CliError(f"objectives {path}: {field or 'document'}: {messages[0]}") from None


def _arm_specs(specs: Sequence[str]) -> list[tuple[str, list[str]]]:
    arms: list[tuple[str, list[str]]] = []
    for spec in specs:
        match = _ARM.match(spec)
        if not match:
            raise CliError(
                f"{spec!r}: an arm is ARM=FILE[,FILE...] (e.g. baseline=run1.json,run2.json)"
            )
        label, files = match.group(1), [f for f in match.group(2).split(",") if f]
        if label in {a for a, _ in arms}:
            raise CliError(f"arm {label!r} is given twice")
        if not files:
            raise CliError(f"arm {label!r} names no file")
        # One file is one run of one arm: the same run counted twice (or in two arms) would make
        # an identical pair look like evidence.
        for path in files:
            owner = next((a for a, paths in arms if path in paths), None)
            if owner is not None or files.count(path) > 1:
                raise CliError(f"{path}: given twice (to arm {owner or label!r} and {label!r})")
        arms.append((label, files))
    if len(arms) < 2:
        raise CliError(
            "give a baseline and at least one candidate: ARM=FILE[,FILE...] twice or more"
        )
    return arms


def read_run_files(path: str) -> list[Any]:
    """Every run in one result file (``specportal.formats``), or ``CliError`` in one line."""
    from specportal.formats import FormatError, read_runs

    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except OSError as exc:
        raise CliError(f"{path}: cannot be read ({exc})") from None
    try:
        return read_runs(data, filename=path)
    except FormatError as exc:
        raise CliError(f"{exc}: not a result file this command reads") from None


def _config(specs: Sequence[str], labels: Sequence[str]) -> dict[str, Mapping[str, Any]]:
    from specportal.engines.document import DocumentError, normalise

    out: dict[str, Mapping[str, Any]] = {}
    for spec in specs:
        match = _ARM.match(spec)
        if not match:
            raise CliError(f"--config {spec!r}: use ARM=CONFIG.json")
        label, path = match.group(1), match.group(2)
        if label not in labels:
            raise CliError(f"--config {label}: no such arm (arms: {', '.join(labels)})")
        raw = _read_json(path, "configuration")
        document = raw.get("document", raw) if isinstance(raw, dict) else raw
        try:
            out[label] = normalise(document)
        except DocumentError as exc:
            raise CliError(f"configuration {path}: {exc}") from None
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def run_input(run: Any, *, run_id: str, arm: str, workload: str, load: str, repetition: int) -> Any:
    """A ``specportal.formats.RunFile`` as the verdict engine's ``RunInput``."""
    from analysis.verdict import RunInput

    summary = dict(run.summary)
    completed = _number(summary.get("completed")) or 0
    result = run.result
    server: Mapping[str, Any] = {}
    prefix = _number(summary.get("prefix_cache_hit_fraction"))
    if result is not None:
        server = (result.server or {}).get("parsed") or {}
        prefix = _number((result.prefix_cache or {}).get("hit_fraction"))
    requests = None
    if run.requests is not None:
        requests = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in run.requests]
    return RunInput(
        id=run_id,
        arm=arm,
        workload=workload,
        load=load,
        repetition=repetition,
        summary=summary if completed > 0 else None,
        acceptance=dict(run.acceptance or {}),
        prefix_cache_hit_fraction=prefix,
        tool=run.format,
        server={"parsed": server} if server else {},
        requests=requests,
        error="" if completed > 0 else "the run measured no request",
    )


def _default_cell(runs: Sequence[Any]) -> tuple[str, str]:
    concurrencies = {r.max_concurrency for r in runs}
    rates = {r.request_rate for r in runs}
    if len(concurrencies) == 1 and None not in concurrencies:
        load = f"c{next(iter(concurrencies))}"
    elif len(rates) == 1 and None not in rates and math.isfinite(next(iter(rates)) or math.inf):
        load = f"r{next(iter(rates)):g}"
    else:
        load = "load"
    return "default", load


def _plan(args: argparse.Namespace, objectives: Mapping[str, Any]) -> int:
    from analysis.verdict import family_plan

    if args.candidates is None or args.candidates < 1:
        raise CliError("--plan needs --candidates N (N >= 1)")
    workload, load = _cell_names(args.cell) if args.cell else ("default", "load")
    plan = family_plan(objectives, args.candidates, [workload], [load])
    if args.json:
        print(json.dumps(plan))
    else:
        print(
            f"fewest repetitions per arm at which this family can decide: {plan['min_repetitions']}"
        )
        print(plan["reason"])
    return 0


def _cell_names(cell: str) -> tuple[str, str]:
    workload, sep, load = cell.partition("/")
    if not sep or not workload or not load:
        raise CliError(f"--cell {cell!r}: use WORKLOAD/LOAD (e.g. chat/c32)")
    return workload, load


def run(args: argparse.Namespace) -> int:
    objectives = _objectives(args.objectives)
    if args.plan:
        return _plan(args, objectives)
    from analysis.objectives import in_scope, objectives_hash, summary_key
    from analysis.verdict import (
        ArmInput,
        ExperimentInput,
        LoadInput,
        compute_verdict,
        exit_status,
        run_statistic,
    )

    arms = _arm_specs(args.arms)
    read: list[tuple[str, str, Any]] = []
    for label, files in arms:
        for path in files:
            for run in read_run_files(path):
                read.append((label, path, run))
    workload, load = _cell_names(args.cell) if args.cell else _default_cell([r for _, _, r in read])
    configs = _config(args.config, [label for label, _ in arms])
    inputs = []
    counters: dict[str, int] = {}
    for label, path, run in read:
        counters[label] = counters.get(label, 0) + 1
        name = Path(path).name + (f"#{run.index}" if run.index else "")
        inputs.append(
            run_input(
                run,
                run_id=name,
                arm=label,
                workload=workload,
                load=load,
                repetition=counters[label],
            )
        )
    if args.emulated:
        import dataclasses

        inputs = [dataclasses.replace(r, emulated=True) for r in inputs]
    slos = objectives.get("slos") or {}
    for index, objective in enumerate(objectives["objectives"]):
        if not in_scope(objective, workload, load):
            continue
        key = summary_key(objective["metric"], objective["statistic"])
        for label, _ in arms:
            mine = [r for r in inputs if r.arm == label]
            if not any(run_statistic(r, key, slos) is not None for r in mine):
                why = (
                    " (the files carry no per-request records to compute it from)"
                    if key in ("slo_attainment", "request_goodput")
                    else ""
                )
                raise CliError(
                    f"objective {index} names {key!r}, which no file of arm {label!r} has{why}"
                )
    concurrency = {r.max_concurrency for _, _, r in read}
    rate = {r.request_rate for _, _, r in read}
    experiment = ExperimentInput(
        arms=[ArmInput(label, configs.get(label), imported=False) for label, _ in arms],
        workloads=[workload],
        loads=[
            LoadInput(
                load,
                next(iter(concurrency)) if len(concurrency) == 1 else None,
                next(iter(rate))
                if len(rate) == 1 and None not in rate and math.isfinite(next(iter(rate)) or 0)
                else None,
            )
        ],
        objectives=objectives,
        objectives_sha256=objectives_hash(objectives),
        runs=inputs,
    )
    verdict = compute_verdict(experiment)
    if args.json:
        print(json.dumps(verdict, ensure_ascii=False, indent=1))
    else:
        print(render_table(verdict))
    return exit_status(verdict)


# --- the table a person reads -------------------------------------------------------------------


def _value(value: float | None, unit: str | None) -> str:
    if value is None:
        return "n/a"
    if unit == "ms":
        return f"{value:.1f} ms"
    if unit == "tok/s":
        return f"{value:,.1f} tok/s"
    if unit == "fraction":
        return f"{value:.3f}"
    return f"{value:.4g}"


def _bounds(interval: Mapping[str, Any] | None) -> str:
    if not interval:
        return ""
    low = "−∞" if interval["low"] is None else f"{interval['low']:.3f}"
    high = "∞" if interval["high"] is None else f"{interval['high']:.3f}"
    return f" [{low}, {high}]"


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def render_table(verdict: Mapping[str, Any]) -> str:
    lines: list[str] = []
    method = verdict["method"]
    if verdict.get("emulated_label"):
        lines.append(verdict["emulated_label"])
    cell = verdict["cells"][0]
    baseline = verdict["arms"][0]["arm"]
    lines.append(f"cell {cell['workload']}/{cell['load']} · baseline {baseline}")
    if method["one_sided_level"] is not None:
        lines.append(
            f"family: {method['family_size']} tests (objective × cell × candidate), Holm at "
            f"{method['alpha']:g}; intervals at {method['interval_level']:.4f}"
        )
    lines.append(
        f"fewest repetitions per arm at which this family can decide: "
        f"{method['min_repetitions'] if method['min_repetitions'] is not None else 'n/a'} "
        f"({method['min_repetitions_reason']})"
    )
    for entry in cell["candidates"]:
        lines.append("")
        lines.append(f"{entry['arm']} vs {baseline}")
        header = [
            "objective",
            "baseline",
            entry["arm"],
            "ratio [interval]",
            "p (Holm)",
            "n",
            "outcome",
        ]
        rows = [header]
        for o in entry["objectives"]:
            rule = f"{o['index']} {o['key']} {o['op']} {o['threshold']}{'×' if o['scope'] == 'relative' else ''}"
            ratio = "" if o["ratio"] is None else f"{o['ratio']:.3f}×{_bounds(o['ratio_interval'])}"
            p = "" if o["p_adjusted"] is None else f"{o['p_adjusted']:.2g}"
            n = f"{o['baseline']['n']}/{o['candidate']['n']}"
            rows.append(
                [
                    rule,
                    _value(o["baseline"]["value"], o["unit"]),
                    _value(o["candidate"]["value"], o["unit"])
                    + _bounds(o["candidate"]["interval"] if o["scope"] == "absolute" else None),
                    ratio,
                    p,
                    n,
                    o["outcome"].replace("_", " "),
                ]
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines.extend("  " + _row(r, widths) for r in rows)
        guards = " · ".join(
            f"{g['name']} {g['outcome'].replace('_', ' ')}" for g in entry["guards"]
        )
        lines.append(f"  guards: {guards}")
        for g in entry["guards"]:
            if g["outcome"] in ("fail", "not_evaluated", "unknown"):
                lines.append(f"    {g['name']}: {g['reason']}")
        for problem in entry["validity"]:
            lines.append(f"  not comparable: {problem['message']}")
        for flag in entry["flags"]:
            lines.append(f"  flag {flag['name']}: {flag['message']}")
        model = entry["model"]
        if model:

            def fmt(v: float | None, spec: str = ".2f") -> str:
                return "unavailable" if v is None else format(v, spec)

            speed = model["measured_speedup"]["output_throughput"]
            lines.append(
                f"  model: K {model['k'] if model['k'] is not None else 'unknown'}, r {fmt(model['acceptance_rate'])}, "
                f"L {fmt(model['mean_acceptance_length'])}, c {fmt(model['draft_cost']['value'])} "
                f"({model['draft_cost']['used'] or 'none'}), predicted {fmt(model['predicted_speedup'])}×, "
                f"measured {fmt(speed)}×"
            )
            lines.append(f"  break-even: {model['break_even']['sentence']}")
        state = entry["state"] or "no verdict (out of scope)"
        lines.append(f"  state: {state}")
        if entry["runs_needed"] is not None:
            lines.append(
                f"  runs needed: about {entry['runs_needed']} per arm, as a new experiment"
            )
        elif entry["runs_needed_at_least"] is not None:
            lines.append(
                f"  runs needed: at least {entry['runs_needed_at_least']} per arm, as a new experiment"
            )
        lines.append(f"  {entry['reasons'][-1]}")
    return "\n".join(lines)
