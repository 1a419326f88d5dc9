"""Time from spawning ``specportal emulate`` to its port accepting connections (target < 0.5 s
after the configured start-up delay), per flavor, and to the first streamed token.

Run:  .venv/bin/python benchmarks/emulator_startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "vllm": ["Qwen/Qwen3-8B"],
    "sglang": ["--model-path", "Qwen/Qwen3-8B"],
    "llamacpp": ["-m", "qwen3-4b.gguf"],
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def once(flavor: str) -> tuple[float, float]:
    port = free_port()
    start = time.monotonic()
    command = [sys.executable, "-m", "specportal", "emulate", "--flavor", flavor]
    command += [*COMMANDS[flavor], "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.002)
        listening = time.monotonic() - start
        body = json.dumps({"prompt": "hi", "max_tokens": 1}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/completions",
            data=body,
            headers={"content-type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=10).read()
        first = time.monotonic() - start
    finally:
        proc.terminate()
        proc.wait(10)
    return listening, first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for flavor in COMMANDS:
        runs = [once(flavor) for _ in range(args.repeat)]
        listen = [r[0] for r in runs]
        first = [r[1] for r in runs]
        print(
            f"{flavor:9s} listening: median {statistics.median(listen):.3f} s, max {max(listen):.3f} s;"
            f"  first completion: median {statistics.median(first):.3f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
