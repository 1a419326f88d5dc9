"""Build time of the real engine: the recorded cold build and a cached reuse, measured now.

    .venv/bin/python benchmarks/realengine_build.py           # recorded cold build + cached reuse
    .venv/bin/python benchmarks/realengine_build.py --cold    # also a fresh cold build (≈6 min,
                                                              # into a temporary cache root)

The cold figures come from ``stamp.json`` next to the cached binary (written by the build that
produced it: download, unpack, configure, compile). Compile time depends on what else runs on the
2 cores; the build runs under ``nice -n 10``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from specportal.realengine import build


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="also build from scratch (slow)")
    args = parser.parse_args()
    print(f"stamp {build.version_stamp()}; cache {build.cache_root()}")
    binary = build.cached_binary_path()
    stamp = binary.parent / "stamp.json"
    if stamp.is_file():
        recorded = json.loads(stamp.read_text())
        steps = recorded["steps_seconds"]
        print(
            f"recorded cold build ({recorded['built_at']}): total {sum(steps.values()):.0f} s, "
            + ", ".join(f"{k} {v:.0f} s" for k, v in steps.items())
        )
    else:
        print("no recorded build: run 'make real-engine' first", file=sys.stderr)
    began = time.monotonic()
    result = build.build()
    print(f"cached reuse: {time.monotonic() - began:.3f} s (reused={result.reused})")
    print(f"binary: {result.binary} ({result.binary.stat().st_size / 1e6:.1f} MB)")
    if args.cold:
        with tempfile.TemporaryDirectory(dir=build.cache_root().parent) as scratch:
            began = time.monotonic()
            cold = build.build(root=Path(scratch))
            print(
                f"cold build now: {time.monotonic() - began:.0f} s "
                + ", ".join(f"{k} {v:.0f} s" for k, v in cold.steps.items())
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
