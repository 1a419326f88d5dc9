"""``specportal lint CONFIG.json``: findings for a frozen configuration; exit 1 on errors."""

from __future__ import annotations

import argparse
import json

from specportal.cli._documents import read_document
from specportal.engines.lint import HostFacts, has_errors, lint

HELP = "check a frozen configuration for engine traps (exit 1 when there are errors)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="configuration JSON file ('-' for stdin)")
    parser.add_argument("--json", action="store_true", help="print the findings as a JSON list")
    parser.add_argument(
        "--offline-host",
        metavar="NAME",
        help="lint for planning onto an offline (air-gapped) host of this name",
    )


def run(args: argparse.Namespace) -> int:
    document = read_document(args.config)
    host = HostFacts(name=args.offline_host, offline=True) if args.offline_host else None
    findings = lint(document, host=host)
    if args.json:
        print(json.dumps([f.as_dict() for f in findings], indent=2))
    else:
        for finding in findings:
            where = f" [{finding.source}]" if finding.source else ""
            print(f"{finding.severity}: {finding.rule}{where}: {finding.message}")
        if not findings:
            print("no findings")
    return 1 if has_errors(findings) else 0
