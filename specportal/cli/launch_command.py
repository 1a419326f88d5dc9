"""``specportal launch-command CONFIG.json``: the exact engine command line for a configuration.

Default output: the argv shell-quoted on one line. ``--json``: the bare argv list. Environment
variables (``runtime.env``) are never part of the argv: ``--show-env`` prints them separately
(text: ``NAME=value`` lines before the command; JSON: ``{"argv": [...], "env": {...}}``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys

from specportal.cli import CliError
from specportal.cli._documents import read_document
from specportal.engines.document import DocumentError
from specportal.engines.launch import build_launch_command

HELP = "print the exact engine command line for a frozen configuration"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="configuration JSON file ('-' for stdin)")
    parser.add_argument("--json", action="store_true", help="print the bare argv list as JSON")
    parser.add_argument(
        "--show-env", action="store_true", help="also print the environment, separately"
    )
    parser.add_argument("--host", help="add --host HOST (as the agent does)")
    parser.add_argument("--port", type=int, help="add --port PORT (as the agent does)")


def run(args: argparse.Namespace) -> int:
    document = read_document(args.config)
    try:
        command = build_launch_command(document, host=args.host, port=args.port)
    except DocumentError as exc:
        raise CliError(f"{args.config}: {exc}") from None
    if args.json:
        if args.show_env:
            print(json.dumps({"argv": command.argv, "env": command.env}))
        else:
            print(json.dumps(command.argv))
    else:
        if args.show_env:
            for name, value in command.env.items():
                print(f"{name}={shlex.quote(value)}")
        print(command.shell())
    if command.env and not args.show_env:
        count = len(command.env)
        print(
            f"# {count} environment variable{'s' if count > 1 else ''} not shown (use --show-env)",
            file=sys.stderr,
        )
    return 0
