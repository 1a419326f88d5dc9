"""Does the verdict hold its error rate, find a real 5 % gain, and decide fast? (issue 11's checks)

Synthetic experiments of run-level summaries, as the verdict engine sees them (``RunInput``): every
run's figures drawn from a log-normal around the configuration's true value with a run-to-run
coefficient of variation (``--cv``, default 2 %, the issue's bound), or resampled from stored result
files (``--pool FILE...``, SpecPortal result files of one configuration: the run-level values come
from real runs and keep their real spread). The family is the issue's: 8 cells (2 workloads × 4
loads) × 3 relative "no regression" objectives (output throughput ratio ≥ 1.0, median TPOT ratio
≤ 1.0, median TTFT ratio ≤ 1.0) for one candidate, Holm at α = 0.05.

- **A/A**: both arms the same configuration. A confident "fail" of any objective is a false DROP;
  targets: per objective ≤ 5 %, per experiment (the whole family under Holm) ≤ 5 %.
- **Power**: the candidate truly 5 % faster (throughput × 1.05, TPOT and TTFT ÷ 1.05). The share
  of cells whose throughput objective passes, at 5, 8, 12 and 20 repetitions per arm, with the
  family and alone (one objective, one cell); target ≥ 90 % at 12 with the family. The same for the
  parametric method (Welch on log values), which may be used only if it passes A/A at the same n.
- **Runs needed**: what INCONCLUSIVE cells predicted against the smallest n that reached 90 %.
- **Speed**: recomputing the verdict of 8 cells × 3 arms × 5 repetitions × 1,000 requests per run
  (records with timings, SLO attainment computed from them); target ≤ 2 s.

    .venv/bin/python benchmarks/verdict_checks.py [--experiments 400] [--cv 0.02]
        [--pool RESULT.json ... | --emulator-runs 24]

Prints one "met"/"NOT met" line per target, and the load average (timings need a quiet machine).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.objectives import objectives_hash, validate_objectives
from analysis.verdict import (
    ArmInput,
    ExperimentInput,
    LoadInput,
    RunInput,
    compute_verdict,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "configs"
WORKLOADS = ("chat", "code")
LOADS = tuple(LoadInput(f"c{c}", c) for c in (1, 8, 32, 128))
# Three relative objectives, each a "no regression" claim the A/A experiment should never refute.
OBJECTIVES = (
    {"metric": "output_throughput", "statistic": "value", "op": ">=", "threshold": 1.0},
    {"metric": "tpot_ms", "statistic": "median", "op": "<=", "threshold": 1.0},
    {"metric": "ttft_ms", "statistic": "median", "op": "<=", "threshold": 1.0},
)
# The summary keys those objectives read, and the direction a faster candidate moves each.
KEYS = {"output_throughput": 1.0, "median_tpot_ms": -1.0, "median_ttft_ms": -1.0}
TRUE_VALUES = {"output_throughput": 1000.0, "median_tpot_ms": 10.0, "median_ttft_ms": 100.0}
REPETITIONS = (5, 8, 12, 20)
ALPHA = 0.05


def _config(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((EXAMPLES / f"{name}.json").read_text())["document"]
    return document


def _objectives(items: Sequence[Mapping[str, Any]], method: str) -> dict[str, Any]:
    return validate_objectives(
        {
            "schema": 2,
            "alpha": ALPHA,
            "method": method,
            "objectives": [{**o, "scope": "relative"} for o in items],
        }
    )


class Values:
    """Where a run's figures come from: log-normal draws, or resampled stored runs."""

    def __init__(self, cv: float, pool: Sequence[Mapping[str, float]] | None) -> None:
        self.cv = cv
        self.pool = pool

    def draw(self, rng: np.random.Generator, gain: float) -> dict[str, float]:
        if self.pool:
            base = dict(self.pool[int(rng.integers(len(self.pool)))])
        else:
            base = {k: v * float(np.exp(rng.normal(0.0, self.cv))) for k, v in TRUE_VALUES.items()}
        return {k: base[k] * gain ** KEYS[k] for k in KEYS}

    def measured_cv(self) -> float:
        if not self.pool:
            return self.cv
        values = [p["output_throughput"] for p in self.pool]
        return statistics.stdev(values) / statistics.fmean(values)


def _summary(figures: Mapping[str, float], completed: int = 1000) -> dict[str, Any]:
    return {
        "completed": completed,
        "failed": 0,
        "requests_sent": completed,
        "duration": 60.0,
        "mean_output_tokens": 48.0,
        "mean_tokens_per_chunk": 1.0,
        **figures,
    }


def experiment(
    rng: np.random.Generator,
    values: Values,
    n: int,
    *,
    gain: float,
    objectives: Mapping[str, Any],
    workloads: Sequence[str] = WORKLOADS,
    loads: Sequence[LoadInput] = LOADS,
) -> ExperimentInput:
    runs: list[RunInput] = []
    for workload in workloads:
        for load in loads:
            for arm, arm_gain in (("baseline", 1.0), ("candidate", gain)):
                for rep in range(1, n + 1):
                    runs.append(
                        RunInput(
                            id=len(runs) + 1,
                            arm=arm,
                            workload=workload,
                            load=load.name,
                            repetition=rep,
                            summary=_summary(values.draw(rng, arm_gain)),
                            host="gpu-1",
                        )
                    )
    arms = {"baseline": "vllm-baseline", "candidate": "vllm-baseline"}
    return _input(arms, runs, objectives, workloads, loads)


def _input(
    arms: Mapping[str, str],
    runs: Sequence[RunInput],
    objectives: Mapping[str, Any],
    workloads: Sequence[str],
    loads: Sequence[LoadInput],
) -> ExperimentInput:
    """The verdict's input: ``arms`` maps each label to its example configuration."""
    return ExperimentInput(
        arms=[ArmInput(label, _config(name)) for label, name in arms.items()],
        workloads=list(workloads),
        loads=list(loads),
        objectives=objectives,
        objectives_sha256=objectives_hash(objectives),
        runs=runs,
    )


def _outcomes(document: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(metric, outcome, objective, cell entry) for every objective of every cell."""
    out = []
    for cell in document["cells"]:
        for entry in cell["candidates"]:
            for o in entry["objectives"]:
                out.append((o["metric"], o["outcome"], o, entry))
    return out


def check_aa(
    values: Values, n: int, experiments: int, method: str, seed: int
) -> tuple[float, float, float]:
    """(false fails per objective, false DROP per experiment, false fails alone) under A/A."""
    rng = np.random.default_rng(seed)
    family = _objectives(OBJECTIVES, method)
    alone = _objectives(OBJECTIVES[:1], method)
    fails = tests = drops = alone_fails = 0
    for _ in range(experiments):
        document = compute_verdict(experiment(rng, values, n, gain=1.0, objectives=family))
        outcomes = _outcomes(document)
        tests += len(outcomes)
        fails += sum(1 for _, outcome, _, _ in outcomes if outcome == "fail")
        drops += document["candidates"][0]["state"] == "DROP"
        single = compute_verdict(
            experiment(
                rng, values, n, gain=1.0, objectives=alone, workloads=("chat",), loads=LOADS[:1]
            )
        )
        alone_fails += any(outcome == "fail" for _, outcome, _, _ in _outcomes(single))
    return fails / tests, drops / experiments, alone_fails / experiments


def check_power(
    values: Values, n: int, experiments: int, method: str, seed: int
) -> tuple[float, float, list[int]]:
    """(throughput passes per cell in the family, passes alone, runs needed predicted)."""
    rng = np.random.default_rng(seed)
    family = _objectives(OBJECTIVES, method)
    alone = _objectives(OBJECTIVES[:1], method)
    passes = cells = alone_passes = 0
    predicted: list[int] = []
    for _ in range(experiments):
        document = compute_verdict(experiment(rng, values, n, gain=1.05, objectives=family))
        for metric, outcome, _, entry in _outcomes(document):
            if metric != "output_throughput":
                continue
            cells += 1
            passes += outcome == "pass"
            if entry["state"] == "INCONCLUSIVE" and entry["runs_needed"] is not None:
                predicted.append(int(entry["runs_needed"]))
        single = compute_verdict(
            experiment(
                rng, values, n, gain=1.05, objectives=alone, workloads=("chat",), loads=LOADS[:1]
            )
        )
        alone_passes += all(outcome == "pass" for _, outcome, _, _ in _outcomes(single))
    return passes / cells, alone_passes / experiments, predicted


def check_speed(repeats: int) -> float:
    """Seconds to compute the verdict of 8 cells × 3 arms × 5 repetitions × 1,000 requests."""
    rng = np.random.default_rng(7)
    noisy = Values(0.02, None)
    objectives = validate_objectives(
        {
            "schema": 2,
            "slos": {"ttft_ms": 500, "tpot_ms": 50},
            "objectives": [
                {**OBJECTIVES[0], "scope": "relative"},
                {**OBJECTIVES[1], "scope": "relative"},
                {"metric": "slo_attainment", "statistic": "value", "op": ">=",
                 "threshold": 0.9, "scope": "absolute"},
            ],
        }
    )  # fmt: skip
    runs: list[RunInput] = []
    for workload in WORKLOADS:
        for load in LOADS:
            for arm in ("baseline", "eagle3", "ngram"):
                for rep in range(1, 6):
                    records = []
                    for i in range(1000):
                        sent = i * 0.01
                        first = sent + float(rng.uniform(0.05, 0.2))
                        gaps = np.cumsum(rng.uniform(0.005, 0.02, size=48))
                        records.append(
                            {
                                "index": i,
                                "sent": sent,
                                "success": True,
                                "output_tokens": 48,
                                "prompt_tokens": 100,
                                "chunk_times": [first, *(first + gaps).tolist()[:47]],
                                "chunk_tokens": [1] * 48,
                            }
                        )
                    runs.append(
                        RunInput(
                            id=len(runs) + 1,
                            arm=arm,
                            workload=workload,
                            load=load.name,
                            repetition=rep,
                            # real runs never tie exactly: 2 % run-to-run noise
                            summary=_summary(noisy.draw(rng, 1.0)),
                            host="gpu-1",
                            requests=records,
                        )
                    )
    arms = {"baseline": "vllm-baseline", "eagle3": "vllm-eagle3-schedule", "ngram": "vllm-ngram"}
    data = _input(arms, runs, objectives, WORKLOADS, LOADS)
    best = math.inf
    for _ in range(repeats):
        started = time.perf_counter()
        compute_verdict(data)
        best = min(best, time.perf_counter() - started)
    return best


def emulator_runs(count: int, folder: Path) -> list[str]:
    """``count`` runs of one configuration on the emulator, as SpecPortal result files: the
    load generator against an emulated vLLM (8B profile, c8, 200 requests of 64 → 32 tokens)."""
    import socket
    import subprocess
    import urllib.request

    cli = [sys.executable, "-m", "specportal"]
    model = "meta-llama/Llama-3.1-8B-Instruct"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [*cli, "emulate", "--flavor", "vllm", model, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    paths = []
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        for i in range(count):
            path = folder / f"run-{i}.json"
            subprocess.run(
                [*cli, "bench", "--backend", "vllm", "--base-url", f"http://127.0.0.1:{port}",
                 "--endpoint", "/v1/completions", "--model", model, "--tokenizer", "toy",
                 "--num-prompts", "200", "--max-concurrency", "8", "--dataset-name", "random",
                 "--input-len", "64", "--output-len", "32", "--seed", str(i),
                 "--output", str(path)],
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            paths.append(str(path))
    finally:
        server.terminate()
        server.wait(timeout=10)
    return paths


def _pool(paths: Sequence[str]) -> list[dict[str, float]]:
    pool = []
    for path in paths:
        summary = json.loads(Path(path).read_text())["summary"]
        pool.append({k: float(summary[k]) for k in KEYS})
    return pool


def within(rate: float, trials: int, bound: float = 0.05) -> bool:
    """A rate is within its bound unless it is significantly above it (one-sided binomial test at
    0.05): 12 false fails in 200 (6 %) is what a true 5 % gives one time in three."""
    from scipy.stats import binomtest

    failures = round(rate * trials)
    return bool(binomtest(failures, trials, bound, alternative="greater").pvalue > 0.05)


def _line(ok: bool, text: str) -> str:
    return f"{'met' if ok else 'NOT met'}: {text}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiments", type=int, default=400, help="synthetic experiments per n")
    parser.add_argument("--cv", type=float, default=0.02, help="run-to-run CV of the draws")
    parser.add_argument("--pool", nargs="*", default=[], help="result files to resample instead")
    parser.add_argument(
        "--emulator-runs", type=int, default=0, help="measure this many runs on the emulator "
        "first and resample them (A/A on the emulator: both arms the same configuration)"
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    if args.emulator_runs:
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="verdict-checks-"))
        args.pool = emulator_runs(args.emulator_runs, folder)
    values = Values(args.cv, _pool(args.pool) or None)
    source = f"{len(args.pool)} stored runs resampled" if args.pool else "log-normal draws"
    print(f"load average {os.getloadavg()[0]:.2f}; {source}; run-to-run CV of output throughput "
          f"{values.measured_cv():.2%}; {args.experiments} experiments per n; family 8 cells × 3 "
          "objectives, Holm at 0.05")  # fmt: skip
    lines: list[str] = []
    reached: dict[str, int | None] = {}
    predicted_at: dict[tuple[str, int], list[int]] = {}
    for method in ("exact", "welch"):
        reached[method] = None
        print(f"\n{method}:  n | A/A fail/objective  false DROP/experiment  fail alone | "
              "power in family  power alone")  # fmt: skip
        aa_ok_at: dict[int, bool] = {}
        for n in REPETITIONS:
            per_test, per_experiment, alone = check_aa(
                values, n, args.experiments, method, args.seed + n
            )
            power, power_alone, predicted = check_power(
                values, n, args.experiments, method, args.seed + 1000 + n
            )
            predicted_at[(method, n)] = predicted
            tests = args.experiments * len(WORKLOADS) * len(LOADS) * len(OBJECTIVES)
            aa_ok_at[n] = (
                within(per_test, tests)
                and within(per_experiment, args.experiments)
                and within(alone, args.experiments)
            )
            if reached[method] is None and power >= 0.9:
                reached[method] = n
            print(f"  {n:>14} | {per_test:>18.2%}  {per_experiment:>21.2%}  {alone:>10.2%} | "
                  f"{power:>15.1%}  {power_alone:>11.1%}")  # fmt: skip
            if n == 12:
                lines.append(_line(aa_ok_at[n], f"{method} A/A at n=12: {per_test:.2%} false "
                                   f"fails per objective, {per_experiment:.2%} false DROPs per "
                                   f"experiment, {alone:.2%} alone (targets ≤ 5 %, or not "
                                   "significantly above it in this many experiments)"))  # fmt: skip
                if method == "exact":
                    lines.append(_line(power >= 0.9, f"exact power at n=12 in the family: "
                                       f"{power:.1%} (target ≥ 90 %)"))  # fmt: skip
        if method == "welch":
            holds = all(aa_ok_at.values())
            verdict = (
                f"reaches 90 % at n={reached['welch']}"
                if reached["welch"]
                else "never reaches 90 %"
            )
            lines.append(
                f"welch (parametric, log values): A/A {'holds' if holds else 'does NOT hold'} "
                f"at every n; {verdict} against exact's n={reached['exact']}"
            )
    for (method, n), predicted in predicted_at.items():
        if predicted and n in (5, 8):
            print(f"runs needed predicted by {method} INCONCLUSIVE cells at n={n}: median "
                  f"{statistics.median(predicted):.0f} (range {min(predicted)}–{max(predicted)}); "
                  f"needed for 90 %: n={reached[method]}")  # fmt: skip
    seconds = check_speed(repeats=3)
    lines.append(_line(seconds <= 2.0, f"verdict of 8 cells × 3 arms × 5 reps × 1,000 requests "
                       f"in {seconds:.2f} s (target ≤ 2 s)"))  # fmt: skip
    print()
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
