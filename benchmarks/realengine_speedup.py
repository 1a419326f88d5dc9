"""Speed-up and acceptance of real speculative decoding per agreement level (llama-server, CPU).

Writes the project's GGUF models, then for each arm starts one llama-server (one at a time, so the
arms never share the cores), warms it up, sends sequential greedy requests and prints, per arm:
decode tokens/s from the server's own ``timings``, speed-up over the plain arm, acceptance (from the
``timings`` sums and from ``/metrics`` deltas), and whether the greedy text equals the plain arm's.

    .venv/bin/python benchmarks/realengine_speedup.py                # pair + tiny set, -t 1
    .venv/bin/python benchmarks/realengine_speedup.py --requests 10 --tokens 256 --threads 2

The plain arm is measured again after the candidates ("plain (again)") so drift from other work on
the machine shows; the load average is printed before and after. Use ``--threads 2`` only on an
otherwise idle machine: with other processes on the 2 cores, llama.cpp's spinning worker threads
collapse (3.7 tok/s plain measured under load, against ≈150 idle). Acceptance counts are
deterministic; tokens/s are not.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from specportal.realengine import build, gguf_models
from specportal.realengine.server import RunningServer, free_port, serve

PROMPTS = (
    "The quick brown fox",
    "def sum_of_squares(values):",
    "What is the capital of France?",
    "Please summarize the following article in three sentences.",
    "Solve for x: 3x + 7 = 22",
)


def counters(server: RunningServer) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(server.get("/metrics").text):
        for sample in family.samples:
            if not sample.labels:
                out[sample.name] = sample.value
    return out


def measure(
    binary: Path, target: Path, draft: Path | None, args: argparse.Namespace
) -> dict[str, Any]:
    port = free_port()
    argv = [
        str(binary), "-m", str(target), "--host", "127.0.0.1", "--port", str(port),
        "-c", "4096", "-np", "1", "-t", str(args.threads), "--metrics", "--no-webui",
    ]  # fmt: skip
    if draft is not None:
        argv += [
            "-md", str(draft), "--spec-type", "draft-simple",
            "--spec-draft-n-max", str(args.n_max), "-td", str(args.threads),
        ]  # fmt: skip
    texts: list[str] = []
    predicted_n = 0
    predicted_ms = 0.0
    drafted = accepted = 0
    with serve(argv, port=port) as server:
        server.post("/completion", {"prompt": "warm up", "n_predict": 16, "temperature": 0})
        before = counters(server)
        for i in range(args.requests):
            body = {
                "prompt": PROMPTS[i % len(PROMPTS)],
                "n_predict": args.tokens,
                "temperature": 0,
                "cache_prompt": False,
            }
            data = server.post("/completion", body).json()
            timings = data["timings"]
            texts.append(data["content"])
            predicted_n += timings["predicted_n"]
            predicted_ms += timings["predicted_ms"]
            drafted += timings.get("draft_n", 0)
            accepted += timings.get("draft_n_accepted", 0)
        after = counters(server)

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    m_drafted = delta("llamacpp:spec_decode_num_draft_tokens_total")
    m_accepted = delta("llamacpp:spec_decode_num_accepted_tokens_total")
    m_drafts = delta("llamacpp:spec_decode_num_drafts_total")
    return {
        "tok_s": predicted_n / (predicted_ms / 1000.0),
        "drafted": drafted,
        "accepted": accepted,
        "acceptance": accepted / drafted if drafted else None,
        "acceptance_metrics": m_accepted / m_drafted if m_drafted else None,
        "mean_acceptance_length": 1 + m_accepted / m_drafts if m_drafts else None,
        "texts": texts,
    }


def table(title: str, rows: list[tuple[str, dict[str, Any]]]) -> None:
    plain = rows[0][1]
    print(f"\n### {title}\n")
    print("| arm | decode tok/s | speed-up | drafted | accepted | acceptance (timings) "
          "| acceptance (/metrics) | mean acc. length | greedy text = plain |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")

    def fmt(value: float | None) -> str:
        return "–" if value is None else f"{value:.3f}"

    for name, row in rows:
        print(
            f"| {name} | {row['tok_s']:.1f} | {row['tok_s'] / plain['tok_s']:.2f}× "
            f"| {row['drafted']} | {row['accepted']} | {fmt(row['acceptance'])} "
            f"| {fmt(row['acceptance_metrics'])} | {fmt(row['mean_acceptance_length'])} "
            f"| {'yes' if row['texts'] == plain['texts'] else 'NO'} |"
        )
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n-max", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pair-dtype", choices=("f32", "f16"), default="f32")
    parser.add_argument("--skip-tiny", action="store_true")
    args = parser.parse_args()
    binary = build.find_binary()
    if binary is None:
        print("llama-server is not built: run 'make real-engine'", file=sys.stderr)
        return 1
    print(f"llama-server: {binary} (stamp {build.version_stamp()})")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"load: {args.requests} sequential greedy requests × {args.tokens} tokens, "
          f"-t {args.threads}, --spec-draft-n-max {args.n_max}, one server at a time")  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        files = gguf_models.write_model_set(out, seed=args.seed, pair_dtype=args.pair_dtype)
        for set_name in ("pair", "tiny"):
            if set_name == "tiny" and args.skip_tiny:
                continue
            target = out / set_name / "target.gguf"
            rows = [("plain", measure(binary, target, None, args))]
            for item in files:
                if item.set == set_name and item.role == "draft":
                    rows.append(
                        (f"draft {item.agreement}", measure(binary, target, out / item.path, args))
                    )
            rows.append(("plain (again)", measure(binary, target, None, args)))
            title = (
                "embedded pair: one expensive target, noisy copies of its embedded draft"
                if set_name == "pair"
                else "tiny target (acceptance and correctness; too small for a speed-up)"
            )
            table(title, rows)
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
