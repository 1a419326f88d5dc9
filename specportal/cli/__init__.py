"""The ``specportal`` command line.

Every subcommand is registered once, in ``SUBCOMMANDS``, as a module path that is imported only
when that subcommand runs: ``specportal --version`` and ``specportal bench`` on a GPU host never
import Django. A subcommand module provides::

    HELP: str                                   # one line for ``specportal --help``
    def add_arguments(parser: argparse.ArgumentParser) -> None
    def run(args: argparse.Namespace) -> int    # the exit status
    def parse_arguments(parser, argv) -> argparse.Namespace   # optional: parse its own way

A subcommand reports bad input by raising ``CliError``: the user sees one line and a non-zero exit,
never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from specportal import __version__


class CliError(Exception):
    """A user-facing failure: printed as one line, exit status ``exit_code``."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Subcommand:
    name: str
    module: str
    summary: str


# The one place where subcommands are registered (summaries are kept here so that ``--help``
# does not import every module).
SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand("lint", "specportal.cli.lint", "check a frozen configuration for engine traps"),
    Subcommand(
        "launch-command",
        "specportal.cli.launch_command",
        "print the exact engine command line for a frozen configuration",
    ),
    Subcommand(
        "import-command",
        "specportal.cli.import_command",
        "turn an existing engine command line into a configuration document",
    ),
    Subcommand(
        "emulate", "specportal.cli.emulate", "run an emulated vLLM, SGLang or llama.cpp server"
    ),
    Subcommand(
        "import",
        "specportal.cli.import_files",
        "import other tools' result files into an import-mode experiment on a portal",
    ),
    Subcommand("ci", "specportal.cli.ci", "run an experiment from CI and gate on its verdict"),
    Subcommand("bench", "specportal.cli.bench", "drive load at a serving endpoint and measure it"),
    Subcommand(
        "compare",
        "specportal.cli.compare",
        "KEEP, DROP or INCONCLUSIVE from result files and objectives (one cell)",
    ),
    Subcommand(
        "agent", "specportal.cli.agent", "run the GPU-host agent that executes benchmark runs"
    ),
    Subcommand(
        "real-engine",
        "specportal.cli.real_engine",
        "build llama-server from the pinned sdist and write test models",
    ),
)


def _available() -> list[Subcommand]:
    """Subcommands whose module exists in this install (later issues add theirs)."""
    found = []
    for sub in SUBCOMMANDS:
        try:
            spec = importlib.util.find_spec(sub.module)
        except ModuleNotFoundError:
            spec = None
        if spec is not None:
            found.append(sub)
    return found


def _top_level_parser(available: Sequence[Subcommand]) -> argparse.ArgumentParser:
    width = max((len(s.name) for s in available), default=0)
    listing = "\n".join(f"  {s.name.ljust(width)}  {s.summary}" for s in available)
    parser = argparse.ArgumentParser(
        prog="specportal",
        description="SpecPortal: does speculative decoding help this workload at this load?",
        epilog=f"commands:\n{listing}\n\nRun 'specportal COMMAND --help' for a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"specportal {__version__}")
    parser.add_argument("command", nargs="?", help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    available = _available()
    top = _top_level_parser(available)
    if not args or args[0].startswith("-"):
        top.parse_args(args)  # handles --version and --help, exits
        top.print_help(sys.stderr)
        return 2
    name, rest = args[0], args[1:]
    sub = next((s for s in available if s.name == name), None)
    if sub is None:
        names = ", ".join(s.name for s in available)
        print(f"specportal: error: unknown command {name!r} (choose from {names})", file=sys.stderr)
        return 2
    module = importlib.import_module(sub.module)
    parser = argparse.ArgumentParser(prog=f"specportal {sub.name}", description=module.HELP)
    module.add_arguments(parser)
    # A module may parse its own way (``emulate`` passes a real engine's flags through).
    parse = getattr(module, "parse_arguments", None)
    parsed = parse(parser, rest) if parse is not None else parser.parse_args(rest)
    try:
        return int(module.run(parsed))
    except CliError as exc:
        print(f"specportal {sub.name}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"specportal {sub.name}: interrupted", file=sys.stderr)
        return 130
