"""``specportal real-engine``: build llama-server from the pinned sdist, write test models."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specportal.cli import CliError

HELP = (
    "build a real llama-server (CPU, from the pinned llama-cpp-python sdist on PyPI) and write "
    "random-weight GGUF test models"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser(
        "build",
        help="build llama-server, or reuse the cached binary when its version stamp matches",
        description="Build llama-server from llama-cpp-python's sdist (about 6 minutes on 2 "
        "cores) into a cache outside the repository; print the binary's path.",
    )
    build.add_argument("--force", action="store_true", help="rebuild even when cached")
    build.add_argument(
        "--jobs", type=int, default=None, help="parallel compile jobs (default: cores)"
    )
    actions.add_parser("path", help="print the cached binary's path; exit 1 if it is not built")
    models = actions.add_parser(
        "models",
        help="write the tiny target, its drafts and the embedded target/draft pair",
        description="Write random-weight GGUF models (deterministic from --seed) and manifest.json.",
    )
    models.add_argument("--out", type=Path, required=True, help="output directory")
    models.add_argument("--seed", type=int, default=0)
    models.add_argument("--no-pair", action="store_true", help="write only the tiny set (≈6 MB)")
    models.add_argument(
        "--pair-dtype", choices=("f32", "f16"), default="f32", help="the pair target's weights"
    )
    models.add_argument(
        "--pair-mix",
        type=float,
        default=0.0,
        help="how far the pair target drifts from its embedded draft (0: exactly the draft)",
    )


def run(args: argparse.Namespace) -> int:
    from specportal.realengine import build as engine_build

    if args.action == "path":
        binary = engine_build.find_binary()
        if binary is None:
            raise CliError(
                f"no llama-server built for stamp {engine_build.version_stamp()} "
                f"(run 'specportal real-engine build')",
                exit_code=1,
            )
        print(binary)
        return 0
    if args.action == "build":
        try:
            result = engine_build.build(force=args.force, jobs=args.jobs)
        except engine_build.BuildError as exc:
            raise CliError(str(exc), exit_code=1) from exc
        how = "reused" if result.reused else "built"
        print(
            f"real-engine: {how} in {result.seconds:.1f} s {json.dumps(result.steps)}",
            file=sys.stderr,
        )
        print(result.binary)
        return 0
    if args.action == "models":
        try:
            from specportal.realengine import gguf_models
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise CliError(
                f"{exc}; install the extra: pip install 'specportal[realengine]'", exit_code=1
            ) from exc
        if args.pair_mix < 0:
            raise CliError("--pair-mix must be >= 0")
        files = gguf_models.write_model_set(
            args.out,
            seed=args.seed,
            include_pair=not args.no_pair,
            pair_dtype=args.pair_dtype,
            pair_mix=args.pair_mix,
        )
        for item in files:
            print(f"{item.sha256}  {args.out / item.path}")
        return 0
    raise CliError(f"unknown action {args.action!r}")  # argparse's choices make this unreachable
