"""Every difference between the emulator's llama.cpp flavor and the real llama-server.

Starts the real server, then the emulator, with the same command line (one at a time), sends the
same probes to both (``specportal.realengine.compare``) and prints each difference, marked as
deliberate, a known defect, or UNEXPLAINED.

    .venv/bin/python benchmarks/realengine_emulator_diff.py
"""

from __future__ import annotations

import fnmatch
import sys
import tempfile
from pathlib import Path

from specportal.realengine import build, compare, gguf_models
from specportal.realengine.server import free_port, serve


def main() -> int:
    binary = build.find_binary()
    if binary is None:
        print("llama-server is not built: run 'make real-engine'", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        gguf_models.write_model_set(out, include_pair=False)
        tiny = out / "tiny"
        args = [
            "-m", str(tiny / "target.gguf"), "-md", str(tiny / "draft-copy.gguf"),
            "--spec-type", "draft-simple", "--spec-draft-n-max", "4", "-t", "1", "-np", "1",
            "-c", "2048", "--metrics", "--no-webui", "--host", "127.0.0.1",
        ]  # fmt: skip
        port = free_port()
        with serve([str(binary), *args, "--port", str(port)], port=port) as server:
            real = compare.observe(server.base_url)
        port = free_port()
        emulate = [sys.executable, "-m", "specportal", "emulate", "--flavor", "llamacpp"]
        with serve([*emulate, *args, "--port", str(port)], port=port) as server:
            emulated = compare.observe(server.base_url)
    found = compare.differences(real, emulated)
    print(f"{len(found)} differences over {len(compare.PROBES)} probes and /metrics")
    for line in found:
        tag = "UNEXPLAINED"
        for table, name in (
            (compare.EMULATOR_DELIBERATE, "deliberate"),
            (compare.EMULATOR_KNOWN_DEFECTS, "known defect"),
        ):
            if any(fnmatch.fnmatchcase(line, pattern) for pattern, _ in table):
                tag = name
                break
        print(f"[{tag}] {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
