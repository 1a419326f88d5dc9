"""``specportal agent --host NAME``: the GPU-host agent (a Celery worker on ``host.NAME``)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from specportal.agent import DEFAULT_STALL_SECONDS, DEFAULT_VISIBILITY_TIMEOUT_SECONDS
from specportal.cli import CliError

HELP = "run the GPU-host agent: executes this host's benchmark runs for the portal"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", required=True, help="the host's registered name")
    parser.add_argument(
        "--portal",
        default=os.environ.get("SPECPORTAL_PORTAL_URL", "http://127.0.0.1:8000"),
        help="the portal's base URL (env SPECPORTAL_PORTAL_URL)",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        help="file holding the host token (default: env SPECPORTAL_HOST_TOKEN)",
    )
    parser.add_argument(
        "--broker",
        default=os.environ.get("CELERY_BROKER_URL", ""),
        help="Celery broker URL (env CELERY_BROKER_URL); empty: the embedded filesystem broker",
    )
    parser.add_argument(
        "--broker-dir",
        type=Path,
        default=Path(os.environ.get("SPECPORTAL_DATA_DIR", "var")) / "broker",
        help="the embedded broker's folder (shared with the portal) when --broker is empty",
    )
    parser.add_argument(
        "--command-template",
        default=os.environ.get("SPECPORTAL_COMMAND_TEMPLATE", ""),
        help="replace the engine's executable, e.g. '{python} -m specportal emulate --flavor "
        "{engine}' (placeholders {python}, {engine})",
    )
    parser.add_argument(
        "--engines",
        default="{}",
        help='installed engines and versions as JSON, e.g. \'{"vllm": ["0.30.0"]}\'; they win '
        "over the versions the agent detects (vllm --version, llama-server --version, sglang's "
        "Python package)",
    )
    parser.add_argument(
        "--no-detect-engines",
        dest="detect_engines",
        action="store_false",
        help="report only the --engines given, without asking the executables on this host",
    )
    parser.add_argument(
        "--sglang-python",
        default=os.environ.get("SPECPORTAL_SGLANG_PYTHON", ""),
        help="the Python interpreter SGLang is installed in (default: the agent's own; env "
        "SPECPORTAL_SGLANG_PYTHON)",
    )
    parser.add_argument(
        "--inventory-refresh-seconds",
        type=float,
        default=600.0,
        help="collect GPUs and engine versions again this often (0: only at start)",
    )
    parser.add_argument(
        "--vllm-bench-command",
        default="vllm bench serve",
        help='the optional runner for workloads with "runner": "vllm-bench-serve"',
    )
    parser.add_argument(
        "--engine-port",
        type=int,
        default=None,
        help="the port managed engines listen on (default: a free port for each run)",
    )
    parser.add_argument(
        "--visibility-timeout",
        type=int,
        default=int(
            os.environ.get("CELERY_VISIBILITY_TIMEOUT", DEFAULT_VISIBILITY_TIMEOUT_SECONDS)
        ),
        help="seconds before Redis redelivers an unacknowledged run; must exceed the longest run "
        "(env CELERY_VISIBILITY_TIMEOUT, as on the portal)",
    )
    parser.add_argument("--work-dir", type=Path, default=Path("var/agent"))
    parser.add_argument("--heartbeat-seconds", type=float, default=15.0)
    parser.add_argument(
        "--health-timeout",
        type=float,
        default=900.0,
        help="seconds an engine may take to answer /health with 200 (a managed engine loading its "
        "model, or an endpoint answering 503 while it loads)",
    )
    parser.add_argument(
        "--endpoint-health-timeout",
        type=float,
        default=60.0,
        help="seconds an endpoint host's server may refuse connections (or not be reached) before "
        "its run fails; a server that answers is waited for up to --health-timeout",
    )
    parser.add_argument(
        "--stall-seconds",
        type=_non_negative,
        default=os.environ.get("SPECPORTAL_STALL_SECONDS", str(DEFAULT_STALL_SECONDS)),
        help="a run that makes no progress this long (no phase, no /health poll while an engine "
        "loads, no request finished, no upload piece sent) is failed with the reason and the agent "
        "restarts; heartbeats stop renewing its lease meanwhile (0: never; env "
        f"SPECPORTAL_STALL_SECONDS; default {DEFAULT_STALL_SECONDS:g}: raise it for workloads "
        "whose single requests take longer)",
    )
    parser.add_argument(
        "--client-processes",
        type=int,
        default=1,
        help="spread the load generator over this many processes (past one core); at most the "
        "load's concurrency",
    )
    parser.add_argument("--loglevel", default="INFO")


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0: {text!r}")
    return value


def broker_connection(
    broker: str, broker_dir: Path, visibility_timeout: int
) -> tuple[str, str | None, dict[str, Any]]:
    """The broker URL, transport and its options: Redis with the shared visibility timeout, or the
    embedded broker in ``broker_dir`` (shared with the portal) when ``broker`` is empty.
    """
    if broker:
        return broker, None, {"visibility_timeout": visibility_timeout}
    # Imported here: kombu comes with the agent extra, which the rest of the CLI does without.
    from specportal import embedded_broker

    return (
        embedded_broker.URL,
        embedded_broker.TRANSPORT,
        embedded_broker.transport_options(broker_dir),
    )


def run(args: argparse.Namespace) -> int:
    try:
        from specportal.agent.executor import AgentSettings
        from specportal.agent.worker import make_app, run_worker
    except ModuleNotFoundError as exc:
        raise CliError(f"the agent needs 'pip install specportal[agent]' ({exc})") from exc
    if args.token_file:
        try:
            token = args.token_file.read_text().strip()
        except OSError as exc:
            raise CliError(f"cannot read the token file: {exc}") from exc
    else:
        token = os.environ.get("SPECPORTAL_HOST_TOKEN", "")
    if not token:
        raise CliError("no host token: use --token-file or set SPECPORTAL_HOST_TOKEN")
    try:
        engines = json.loads(args.engines)
    except ValueError as exc:
        raise CliError(f"--engines is not JSON: {exc}") from exc
    if not isinstance(engines, dict):
        raise CliError('--engines must be a JSON object like {"vllm": ["0.30.0"]}')
    settings = AgentSettings(
        host=args.host,
        portal_url=args.portal,
        token=token,
        command_template=args.command_template or None,
        work_dir=args.work_dir,
        heartbeat_seconds=args.heartbeat_seconds,
        health_timeout_seconds=args.health_timeout,
        endpoint_health_timeout_seconds=args.endpoint_health_timeout,
        engines={str(k): [str(v) for v in vs] for k, vs in engines.items()},
        detect_engines=args.detect_engines,
        sglang_python=args.sglang_python or None,
        inventory_refresh_seconds=args.inventory_refresh_seconds,
        vllm_bench_command=args.vllm_bench_command,
        engine_port=args.engine_port,
        stall_seconds=args.stall_seconds,
        client_processes=max(1, args.client_processes),
    )
    broker, transport, options = broker_connection(
        args.broker, args.broker_dir, args.visibility_timeout
    )
    app, heartbeat = make_app(
        settings, broker_url=broker, broker_transport=transport, transport_options=options
    )
    run_worker(app, heartbeat, args.host, args.loglevel)
    return 0
