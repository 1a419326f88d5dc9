"""``specportal import-command "vllm serve ..."``: an existing command line → a configuration.

The command may be one quoted string or the words after ``--``. Leading ``NAME=value`` words
become ``runtime.env``. The command line carries no engine build or sampling: give them with
``--engine-version``, ``--image``, ``--sampling``, ``--placement`` (and for llama.cpp
``--model-sha256``, ``--draft-sha256``) to reproduce a configuration exactly (same
hash as the document ``launch-command`` was run on).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from specportal.cli import CliError
from specportal.engines.document import DocumentError, identity
from specportal.engines.flags import ENGINES
from specportal.engines.importer import ImportProblem, import_command

HELP = "turn an existing engine command line into a configuration document"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", choices=ENGINES, help="when the program does not say it")
    parser.add_argument("--engine-version", help="engine_build.version")
    parser.add_argument("--image", help="engine_build.image")
    parser.add_argument("--sampling", help="the sampling section, as JSON")
    parser.add_argument("--placement", help="runtime.placement, as JSON")
    parser.add_argument(
        "--model-sha256", help="llama.cpp: target.model_sha256 (the GGUF's SHA-256)"
    )
    parser.add_argument(
        "--draft-sha256", help="llama.cpp: proposal.spec_draft_model_sha256 (the draft GGUF's)"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print {document, config_hash, method, ignored} instead of the bare document",
    )
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, help="the command line (one string, or words)"
    )


def _json_option(name: str, text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"--{name} is not JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise CliError(f"--{name} must be a JSON object")
    return value


def run(args: argparse.Namespace) -> int:
    words: list[str] = [w for w in args.command if w != "--"] if args.command else []
    if not words:
        raise CliError('give the command line to import, e.g. "vllm serve MODEL ..."')
    command: str | list[str] = words[0] if len(words) == 1 else words
    try:
        result = import_command(
            command,
            engine=args.engine,
            engine_version=args.engine_version,
            image=args.image,
            sampling=_json_option("sampling", args.sampling),
            placement=_json_option("placement", args.placement),
            model_sha256=args.model_sha256,
            draft_sha256=args.draft_sha256,
        )
    except ImportProblem as exc:
        raise CliError(str(exc)) from None
    except DocumentError as exc:
        raise CliError(f"the imported configuration is invalid: {exc}") from None
    if args.json:
        ident = identity(result.document)
        print(
            json.dumps(
                {
                    "document": result.document,
                    "config_hash": ident.config_hash,
                    "method": ident.method,
                    "ignored": result.ignored,
                },
                indent=2,
            )
        )
    else:
        print(json.dumps(result.document, indent=2))
    if result.ignored:
        print(
            f"# ignored server options (the agent sets them): {' '.join(result.ignored)}",
            file=sys.stderr,
        )
    return 0
