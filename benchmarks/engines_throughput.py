"""How fast the Django-free configuration core is: normalise+hash, lint, launch, import.

    .venv/bin/python benchmarks/engines_throughput.py [--seconds 2]

Prints operations per second for each step on the example configurations (all three engines).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specportal.engines.document import prepare
from specportal.engines.importer import import_command
from specportal.engines.launch import build_launch_command
from specportal.engines.lint import lint

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "configs"


def rate(
    step: Callable[[dict[str, Any]], object], docs: list[dict[str, Any]], seconds: float
) -> float:
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for doc in docs:
            step(doc)
        done += len(docs)
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    docs = [json.loads(p.read_text())["document"] for p in sorted(EXAMPLES.glob("*.json"))]
    commands = {id(d): build_launch_command(d).shell_with_env() for d in docs}
    steps: dict[str, Callable[[dict[str, Any]], object]] = {
        "normalise + hash": prepare,
        "lint": lint,
        "launch command": build_launch_command,
        "import command": lambda d: import_command(commands[id(d)]),
    }
    print(f"{len(docs)} example configurations, {args.seconds:g} s per step")
    for name, step in steps.items():
        print(f"{name:>18}: {rate(step, docs, args.seconds):10.0f} per second")


if __name__ == "__main__":
    main()
