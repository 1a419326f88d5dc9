"""``specportal emulate``: an emulated vLLM, SGLang or llama.cpp server on loopback.

The real engine's command line works with only the executable swapped::

    vllm serve MODEL ...                 →  specportal emulate --flavor vllm MODEL ...
    python -m sglang.launch_server ...   →  specportal emulate --flavor sglang ...
    llama-server ...                     →  specportal emulate --flavor llamacpp ...

Engine flags are parsed with the engine's flag table (``specportal.engines``), the same table the
launch-command builder uses; ``--emu-*`` flags (and ``--flavor``) are the emulator's own.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from specportal.cli import CliError

HELP = "run an emulated vLLM, SGLang or llama.cpp server (a test double, never a benchmark)"

FLAVORS = ("vllm", "sglang", "llamacpp")

EPILOG = """\
engine flags:
  Everything that is not --flavor or --emu-* is the real engine's own command line, parsed with
  that engine's flag table, e.g.
    specportal emulate --flavor vllm Qwen/Qwen3-8B --speculative-config '{"method":"ngram",...}'
    specportal emulate --flavor sglang --model-path Qwen/Qwen3-8B --speculative-algorithm EAGLE
    specportal emulate --flavor llamacpp -m target.gguf -md draft.gguf --spec-type draft-simple
  Flags the engine does not know are refused as the engine refuses them.
  See specportal/emulator/README.md for the cost model and the --model → profile mapping.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from specportal.emulator import options

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG + _engine_flag_listing()
    parser.add_argument(
        "--flavor",
        choices=FLAVORS,
        required=True,
        help="which engine to emulate: vllm, sglang or llamacpp",
    )
    options.add_arguments(parser)


def _engine_flag_listing() -> str:
    """Every engine flag each flavor accepts, from the flag tables (one source of truth)."""
    import textwrap

    from specportal.engines.flags import TABLES

    parts = ["\nengine flags accepted per flavor (from specportal.engines.flags):"]
    for flavor in FLAVORS:
        names: list[str] = []
        for flag in TABLES[flavor].flags:
            if flag.removed:
                continue
            spelled = "|".join(flag.names) if flag.names else flag.key
            names.append(f"{spelled} (positional)" if flag.positional else spelled)
        body = textwrap.fill(
            ", ".join(names),
            width=96,
            initial_indent="    ",
            subsequent_indent="    ",
            break_on_hyphens=False,
            break_long_words=False,
        )
        parts.append(f"  {flavor}:\n{body}")
    return "\n".join(parts) + "\n"


def parse_arguments(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """Emulator flags here; everything else is the engine's (kept in order for its parser)."""
    parsed, engine_argv = parser.parse_known_args(list(argv))
    parsed.engine_argv = engine_argv
    return parsed


def run(args: argparse.Namespace) -> int:
    from specportal.emulator import flavors, options

    emu = options.from_namespace(args)
    engine_argv = list(getattr(args, "engine_argv", []))
    try:
        config, make_app = flavors.configure(args.flavor, engine_argv, emu)
    except flavors.EngineRefused as exc:
        # The real engine's own message and exit status.
        print(str(exc), file=sys.stderr)
        return exc.status
    except flavors.ConfigError as exc:
        raise CliError(str(exc)) from exc
    from specportal.emulator.server import run as serve

    return serve(config, make_app)
