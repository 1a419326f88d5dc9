"""The web process's memory for one result upload: a real ``runserver`` on loopback, one PUT.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/sp_bench_upload \\
        .venv/bin/python benchmarks/upload_memory.py [--requests 50000] [--upload FILE]

Builds (or reads) the agent's gzip'd upload as ``benchmarks/ingest_copy.py`` does (50,000 requests
of 256 tokens in 100 chunks are ~47 MB gzip'd, ~207 MB of JSON) and one a tenth its size, starts
the portal's web process (``manage.py runserver --noreload --nothreading``, DEBUG off) against
the database named by ``DATABASE_URL`` (migrated first), and PUTs the small upload, then the
large one, each for a running run of a host, over the agents' API. Prints the server's resident
memory before and its peak (``VmHWM``) after each PUT, the PUTs' wall times and answers. Target
(issue 15, finding 5): memory bounded independently of the upload's size: the large upload
raises the peak over what the small one reached by less than its own size (reading it whole
costs about ten times its size).
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "specportal.settings")


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process so far (steadier than wall time on a busy box)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _delete(runs: Any) -> None:
    """Delete runs, ingested ones too: the tables' owner switches the append-only guard off
    (runs/migrations/0002) for its own clean-up."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL specportal.identity_guard = 'off'")
        runs.delete()


def _chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            yield chunk


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--upload", type=Path, help="an upload file to PUT instead of building one")
    args = parser.parse_args()

    import django

    django.setup()
    import httpx
    import portal_db
    from django.utils import timezone
    from ingest_copy import make_upload

    from configurations.services import configuration_create
    from experiments.models import Arm, Experiment
    from hosts.services import host_register, host_token_issue
    from runs.models import Run

    if not portal_db.prepare():
        return 2

    upload = args.upload or ROOT / "var" / f"bench-upload-{args.requests}.json.gz"
    if not upload.exists():
        upload.parent.mkdir(parents=True, exist_ok=True)
        upload.write_bytes(make_upload(args.requests, 100, 256))
    small = ROOT / "var" / f"bench-upload-{args.requests // 10}-run2.json.gz"
    if not small.exists():
        text = gzip.decompress(make_upload(args.requests // 10, 100, 256))
        small.write_bytes(gzip.compress(text.replace(b'"run":1,', b'"run":2,', 1), 5))

    config, _ = configuration_create(
        document={"schema": 1, "engine": "vllm", "proposal": {},
                  "target": {"model": "bench/model", "revision": "0" * 40}}
    )  # fmt: skip
    host = host_register(name=f"bench-upload-{os.getpid()}")
    token = host_token_issue(host=host)
    experiment = Experiment.objects.create(
        name="upload memory", workloads=[{"name": "w"}], loads=[{"name": "l"}], objectives={}
    )
    arm = Arm.objects.create(experiment=experiment, position=0, label="a", configuration=config)
    # The uploads name runs 1 (the large one, the benchmark's file) and 2, attempt 1.
    _delete(Run.objects.filter(pk__in=[1, 2]))
    for run_id in (1, 2):
        Run.objects.create(
            pk=run_id, experiment=experiment, arm=arm, host=host, sequence=run_id, workload="w",
            load="l", repetition=run_id, position=1, estimated_seconds=0,
            status=Run.Status.RUNNING, attempt=1, claimed_at=timezone.now(),
            lease_expires_at=timezone.now() + timedelta(hours=1),
        )  # fmt: skip
    port = 18_000 + os.getpid() % 1000
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", "--noreload", "--nothreading",
         f"127.0.0.1:{port}"],
        # DEBUG off, as in production: with it on, Django keeps every query's SQL (an
        # upload's bytes among them) for the debug toolbar's sake.
        cwd=os.getcwd(), env={**os.environ, "PYTHONUNBUFFERED": "1", "DJANGO_DEBUG": "false"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Host {token}"}
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/api/v1/agent/runs/1", headers=headers).status_code:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        before = _status_kb(server.pid, "VmRSS")
        lines = []
        peaks = []
        for run_id, path in ((2, small), (1, upload)):
            size = path.stat().st_size
            t, cpu = time.perf_counter(), _cpu_seconds(server.pid)
            answer = httpx.put(
                f"{base}/api/v1/agent/runs/{run_id}/result?attempt=1",
                content=_chunks(path),
                headers={**headers, "Content-Type": "application/json",
                         "Content-Encoding": "gzip", "Content-Length": str(size)},
                timeout=600,
            )  # fmt: skip
            seconds = time.perf_counter() - t
            cpu = _cpu_seconds(server.pid) - cpu
            peaks.append(_status_kb(server.pid, "VmHWM"))
            lines.append(
                f"PUT {path.name} ({size / 1e6:.1f} MB gzip'd): {answer.status_code} in "
                f"{seconds:.2f} s ({cpu:.2f} s CPU in the web process), peak RSS {peaks[-1] / 1024:.0f} MB "
                f"(+{(peaks[-1] - before) / 1024:.0f} MB): {answer.text[:100]}"
            )
    finally:
        server.terminate()
        server.wait(30)
        _delete(Run.objects.filter(experiment=experiment))
        experiment.delete()
    print(f"web process RSS before the uploads: {before / 1024:.0f} MB")
    print("\n".join(lines))
    more = (peaks[1] - peaks[0]) / 1024
    bound = upload.stat().st_size / 2**20
    print(
        f"the large upload raised the peak by {more:.0f} MB over the small one's "
        f"(bound: less than its own size, {bound:.0f} MiB): {'met' if more < bound else 'NOT met'} "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
