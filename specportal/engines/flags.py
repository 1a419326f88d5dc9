"""Per-engine flag tables: the one source of truth for engine options (DESIGN §2).

The launch-command builder (``specportal.engines.launch``), the importer
(``specportal.engines.importer``), the linter (``specportal.engines.lint``), the document validator
(``specportal.engines.document``) and the emulator's argument parser all read these tables.

Each :class:`Flag` gives the option's spellings (``--tensor-parallel-size``, ``-tp``), the document
key (dashes turned into underscores, prefixes kept: ``tensor_parallel_size``,
``speculative_num_steps``, ``spec_draft_n_max``), the document section it belongs to
(``target``, ``proposal``, or ``server`` for options that are not part of a configuration's
identity, such as ``--host`` and ``--port``), its type and choices, the engine versions that accept
it (``since`` inclusive, ``until`` exclusive), and for options the engine no longer accepts the
replacement and the engine's own message. ``default`` is documentation only: SpecPortal never fills
engine defaults into documents, because they change between versions.

vLLM's proposal is not a set of flags but the JSON value of ``--speculative-config``; its keys are
described by :data:`VLLM_SPECULATIVE_CONFIG_KEYS` (same :class:`Flag` shape, no spellings).

Parsing an engine's command line (what the emulator does with ``vllm serve ...``)::

    from specportal.engines.flags import parse_engine_argv, EngineArgumentError

    try:
        parsed = parse_engine_argv("vllm", ["vllm", "serve", "org/model", "-tp", "2",
                                            "--speculative-config", '{"method": "ngram"}'])
    except EngineArgumentError as exc:
        print(exc.message, file=sys.stderr)   # the real engine's wording
        raise SystemExit(exc.exit_code)       # argparse's 2, llama-server's 1
    parsed.target      # {"model": "org/model", "tensor_parallel_size": 2}
    parsed.proposal    # {"method": "ngram"}  (vLLM: the parsed --speculative-config JSON)
    parsed.server      # {"host": ..., "port": ...} when given
    parsed.values      # every known key → typed value, all sections together

``argv`` may start with the program (``vllm serve``, ``python -m sglang.launch_server``,
``python3 -m sglang.launch_server``, ``llama-server`` or a path ending in it) or be the bare
arguments. ``--flag=value`` and ``--flag value`` are both accepted; vLLM also accepts underscores
in long flags (``--max_model_len``) as its own parser does. Unknown flags and removed flags raise
:class:`EngineArgumentError` carrying the real engine's message, unless ``allow_unknown=True``
(the importer's mode), which collects unknown flags verbatim in ``ParsedArgs.extra_args``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Engine = Literal["vllm", "sglang", "llamacpp"]
ENGINES: Final[tuple[Engine, ...]] = ("vllm", "sglang", "llamacpp")
# How people write each engine's name (pages, the admin's choices).
ENGINE_NAMES: Final[Mapping[Engine, str]] = {
    "vllm": "vLLM",
    "sglang": "SGLang",
    "llamacpp": "llama.cpp",
}
Section = Literal["target", "proposal", "server"]
FlagType = Literal["int", "float", "str", "bool", "json", "list", "choice"]


@dataclass(frozen=True)
class Flag:
    """One engine option (or, with no ``names``, one key that only exists in the document)."""

    names: tuple[str, ...]
    key: str
    section: Section
    type: FlagType
    help: str = ""
    choices: tuple[str, ...] = ()
    # ``choice`` with ``multiple``: a comma-separated list of choices in one string (llama.cpp's
    # ``--spec-type draft-simple,ngram-mod``); stored in documents as that string.
    multiple: bool = False
    # ``list``: item type, and how the engine takes it (``None``: one argv token per item,
    # ``","``: one token joined by commas).
    item_type: Literal["int", "float", "str"] = "str"
    separator: str | None = None
    # Spellings that set a ``bool`` to False (``--no-enable-prefix-caching``).
    negations: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    since: str | None = None
    until: str | None = None
    renamed_to: str | None = None
    removed_message: str | None = None
    default: str | None = None  # documentation only; never filled into documents
    positional: bool = False  # vLLM's ``vllm serve MODEL``
    # ``int``: the command line also takes vLLM's human-readable sizes ("32k" = 32000,
    # "32K" = 32768, "1m" / "1M"), as ``--max-model-len`` does.
    human_readable: bool = False
    # ``str``: a whole number is accepted and stored as its string (llama.cpp's ``-ngl 99``, which
    # also takes ``auto`` and ``all``), so 99 and "99" are the same configuration.
    numbers_as_text: bool = False

    @property
    def flag(self) -> str:
        """The spelling the launch-command builder writes."""
        return self.names[0] if self.names else ""

    @property
    def removed(self) -> bool:
        return self.removed_message is not None


@dataclass(frozen=True)
class EngineTable:
    engine: Engine
    program: tuple[str, ...]
    flags: tuple[Flag, ...]
    # vLLM only: keys of the ``--speculative-config`` JSON object.
    proposal_keys: tuple[Flag, ...] = ()
    # Document-only keys (pins the engine never sees, free-form ``extra_args``).
    document_keys: tuple[Flag, ...] = ()
    # Versions the tables describe; anything newer or unparsable is "unknown" to the linter.
    known_versions: tuple[str, str] = ("0", "0")
    unknown_flag_message: str = ""
    argument_exit_code: int = 2

    def by_name(self) -> dict[str, Flag]:
        out: dict[str, Flag] = {}
        for flag in self.flags:
            for name in (*flag.names, *flag.negations):
                out[name] = flag
        return out

    def section_keys(self, section: Section) -> dict[str, Flag]:
        """Document keys of one section → their description (flags, JSON keys, pins)."""
        out: dict[str, Flag] = {}
        pool: Iterable[Flag]
        if section == "proposal" and self.proposal_keys:
            pool = self.proposal_keys
        else:
            pool = (*self.flags, *self.document_keys)
        for item in pool:
            if item.section == section and not item.removed and item.key not in out:
                out[item.key] = item
        return out


def _f(names: str, key: str, section: Section, type_: FlagType, **kw: Any) -> Flag:
    """Compact constructor: ``names`` is a space-separated list of spellings."""
    return Flag(names=tuple(names.split()), key=key, section=section, type=type_, **kw)


def _k(key: str, section: Section, type_: FlagType, **kw: Any) -> Flag:
    """A document key with no command-line spelling of its own."""
    return Flag(names=(), key=key, section=section, type=type_, **kw)


# --- vLLM -----------------------------------------------------------------------------------------
# Sources: reference/vllm-formats.md §5, vLLM's EngineArgs (arg_utils.py) and SpeculativeConfig.

VLLM_SPECULATIVE_METHODS: Final = (
    "ngram",
    "ngram_gpu",
    "medusa",
    "mlp_speculator",
    "draft_model",
    "suffix",
    "custom_class",
    "eagle",
    "eagle3",
    "extract_hidden_states",
    "dflash",
    "dspark",
    "mtp",
    "deepseek_mtp",
    "qwen3_next_mtp",
    "glm4_moe_mtp",
    "mimo_mtp",
    "ernie_mtp",
)
# Any ``<model type>_mtp`` is an MTP method in vLLM (there are many).
VLLM_MTP_METHOD = re.compile(r"^[a-z0-9_]+_mtp$")

VLLM_FLAGS: Final[tuple[Flag, ...]] = (
    _f("--model", "model", "target", "str", positional=True, help="target model (hub id or path)"),
    _f("--revision", "revision", "target", "str", help="target revision (pin: 40-hex commit)"),
    _f("--code-revision", "code_revision", "target", "str"),
    _f("--tokenizer", "tokenizer", "target", "str"),
    _f("--tokenizer-revision", "tokenizer_revision", "target", "str"),
    _f(
        "--tokenizer-mode",
        "tokenizer_mode",
        "target",
        "choice",
        choices=("auto", "hf", "slow", "mistral", "custom"),
        default="auto",
    ),
    _f(
        "--trust-remote-code",
        "trust_remote_code",
        "target",
        "bool",
        negations=("--no-trust-remote-code",),
    ),
    _f(
        "--dtype",
        "dtype",
        "target",
        "choice",
        choices=("auto", "half", "float16", "bfloat16", "float", "float32"),
        default="auto",
    ),
    _f("--quantization -q", "quantization", "target", "str"),
    _f("--kv-cache-dtype", "kv_cache_dtype", "target", "str", default="auto"),
    _f("--load-format", "load_format", "target", "str", default="auto"),
    _f("--seed", "seed", "target", "int", minimum=0),
    _f(
        "--tensor-parallel-size -tp",
        "tensor_parallel_size",
        "target",
        "int",
        minimum=1,
        maximum=1024,
        default="1",
    ),
    _f(
        "--pipeline-parallel-size -pp",
        "pipeline_parallel_size",
        "target",
        "int",
        minimum=1,
        maximum=1024,
        default="1",
    ),
    _f(
        "--data-parallel-size -dp",
        "data_parallel_size",
        "target",
        "int",
        minimum=1,
        maximum=1024,
        default="1",
    ),
    _f(
        "--enable-expert-parallel",
        "enable_expert_parallel",
        "target",
        "bool",
        negations=("--no-enable-expert-parallel",),
    ),
    _f(
        "--max-model-len",
        "max_model_len",
        "target",
        "int",
        minimum=1,
        maximum=10_000_000,
        human_readable=True,
    ),
    _f(
        "--gpu-memory-utilization",
        "gpu_memory_utilization",
        "target",
        "float",
        minimum=0.0,
        exclusive_minimum=True,
        maximum=1.0,
        default="0.9",
    ),
    _f("--max-num-seqs", "max_num_seqs", "target", "int", minimum=1, maximum=1_000_000),
    _f("--max-num-batched-tokens", "max_num_batched_tokens", "target", "int", minimum=1),
    _f("--block-size", "block_size", "target", "int", minimum=1),
    _f("--swap-space", "swap_space", "target", "float", minimum=0),
    _f(
        "--enable-prefix-caching",
        "enable_prefix_caching",
        "target",
        "bool",
        negations=("--no-enable-prefix-caching",),
    ),
    _f(
        "--enable-chunked-prefill",
        "enable_chunked_prefill",
        "target",
        "bool",
        negations=("--no-enable-chunked-prefill",),
    ),
    _f("--enforce-eager", "enforce_eager", "target", "bool", negations=("--no-enforce-eager",)),
    _f(
        "--async-scheduling",
        "async_scheduling",
        "target",
        "bool",
        negations=("--no-async-scheduling",),
    ),
    _f("--compilation-config", "compilation_config", "target", "json"),
    _f("--generation-config", "generation_config", "target", "str", default="auto"),
    _f("--max-logprobs", "max_logprobs", "target", "int", minimum=0),
    _f("--speculative-config", "speculative_config", "proposal", "json"),
    # Server options: not identity (the agent chooses host, port and the served name).
    _f("--host", "host", "server", "str"),
    _f("--port", "port", "server", "int", minimum=0, maximum=65535, default="8000"),
    _f("--api-key", "api_key", "server", "str"),
    _f("--served-model-name", "served_model_name", "server", "list"),
    _f("--uvicorn-log-level", "uvicorn_log_level", "server", "str"),
    _f(
        "--disable-log-requests",
        "disable_log_requests",
        "server",
        "bool",
        negations=("--no-disable-log-requests",),
    ),
    _f(
        "--enable-log-requests",
        "enable_log_requests",
        "server",
        "bool",
        negations=("--no-enable-log-requests",),
    ),
    _f(
        "--disable-log-stats",
        "disable_log_stats",
        "server",
        "bool",
        negations=("--no-disable-log-stats",),
    ),
    _f(
        "--disable-uvicorn-access-log",
        "disable_uvicorn_access_log",
        "server",
        "bool",
        negations=("--no-disable-uvicorn-access-log",),
    ),
    # Removed top-level speculative flags (vLLM PR #15466, first released in 0.8.3).
    _f(
        "--speculative-model",
        "speculative_model",
        "proposal",
        "str",
        until="0.8.3",
        renamed_to="--speculative-config '{\"model\": ...}'",
        removed_message="unrecognized arguments: --speculative-model "
        "(removed: use --speculative-config '{\"model\": ...}')",
    ),
    _f(
        "--num-speculative-tokens",
        "num_speculative_tokens",
        "proposal",
        "int",
        until="0.8.3",
        renamed_to="--speculative-config '{\"num_speculative_tokens\": ...}'",
        removed_message="unrecognized arguments: --num-speculative-tokens "
        "(removed: use --speculative-config '{\"num_speculative_tokens\": ...}')",
    ),
    _f(
        "--ngram-prompt-lookup-max",
        "ngram_prompt_lookup_max",
        "proposal",
        "int",
        until="0.8.3",
        renamed_to='--speculative-config \'{"method": "ngram", "prompt_lookup_max": ...}\'',
        removed_message="unrecognized arguments: --ngram-prompt-lookup-max "
        '(removed: use --speculative-config \'{"method": "ngram", "prompt_lookup_max": ...}\')',
    ),
    _f(
        "--ngram-prompt-lookup-min",
        "ngram_prompt_lookup_min",
        "proposal",
        "int",
        until="0.8.3",
        renamed_to='--speculative-config \'{"method": "ngram", "prompt_lookup_min": ...}\'',
        removed_message="unrecognized arguments: --ngram-prompt-lookup-min "
        '(removed: use --speculative-config \'{"method": "ngram", "prompt_lookup_min": ...}\')',
    ),
    _f(
        "--speculative-draft-tensor-parallel-size",
        "speculative_draft_tensor_parallel_size",
        "proposal",
        "int",
        until="0.8.3",
        renamed_to="--speculative-config '{\"draft_tensor_parallel_size\": ...}'",
        removed_message="unrecognized arguments: --speculative-draft-tensor-parallel-size "
        "(removed: use --speculative-config '{\"draft_tensor_parallel_size\": ...}')",
    ),
    _f(
        "--speculative-disable-by-batch-size",
        "speculative_disable_by_batch_size",
        "proposal",
        "int",
        until="0.8.3",
        renamed_to="--speculative-config '{\"num_speculative_tokens_per_batch_size\": ...}'",
        removed_message="unrecognized arguments: --speculative-disable-by-batch-size "
        "(removed: use a per-batch-size schedule in --speculative-config)",
    ),
)

VLLM_SPECULATIVE_CONFIG_KEYS: Final[tuple[Flag, ...]] = (
    _k(
        "method",
        "proposal",
        "choice",
        choices=("none", *VLLM_SPECULATIVE_METHODS),
        help="speculative method; '<model type>_mtp' names are accepted as MTP methods",
    ),
    _k("model", "proposal", "str", help="draft model, EAGLE head or MTP weights"),
    _k("revision", "proposal", "str", help="draft revision (pin: 40-hex commit)"),
    _k("code_revision", "proposal", "str"),
    _k("quantization", "proposal", "str"),
    _k("num_speculative_tokens", "proposal", "int", minimum=1, maximum=64),
    _k(
        "num_speculative_tokens_per_batch_size",
        "proposal",
        "json",
        help="[[start_bs, end_bs_inclusive, K], ...]; K = 0 drafts nothing in that range",
    ),
    _k("draft_tensor_parallel_size", "proposal", "int", minimum=1, maximum=1024),
    # Accepted by vLLM only to raise an error that points at draft_tensor_parallel_size.
    _k("tensor_parallel_size", "proposal", "int", minimum=1),
    _k("max_model_len", "proposal", "int", minimum=1),
    _k("prompt_lookup_min", "proposal", "int", minimum=1, maximum=1024),
    _k("prompt_lookup_max", "proposal", "int", minimum=1, maximum=1024),
    _k("disable_padded_drafter_batch", "proposal", "bool", default="false"),
    _k("parallel_drafting", "proposal", "bool", default="false"),
    _k("enforce_eager", "proposal", "bool"),
    _k("suffix_decoding_max_tree_depth", "proposal", "int", minimum=1, default="24"),
    _k("suffix_decoding_max_cached_requests", "proposal", "int", minimum=0, default="10000"),
    _k("suffix_decoding_max_spec_factor", "proposal", "float", minimum=0, default="1.0"),
    _k("suffix_decoding_min_token_prob", "proposal", "float", minimum=0, maximum=1, default="0.1"),
    _k(
        "rejection_sample_method",
        "proposal",
        "choice",
        choices=("standard", "synthetic", "block", "fly"),
        help="'fly' is vLLM's FLy verification: intentionally lossy",
        default="standard",
    ),
    _k("fly_window_size", "proposal", "int", minimum=1),
    _k("fly_entropy_threshold", "proposal", "float", minimum=0),
    _k("fly_entropy_top_k", "proposal", "int", minimum=1),
    _k("synthetic_acceptance_rates", "proposal", "list", item_type="float"),
    _k("synthetic_acceptance_length", "proposal", "float", minimum=0),
    _k("draft_sample_method", "proposal", "choice", choices=("greedy", "probabilistic")),
    _k("moe_backend", "proposal", "str"),
    _k("attention_backend", "proposal", "str"),
    _k("kv_cache_dtype", "proposal", "str"),
    _k("use_local_argmax_reduction", "proposal", "bool"),
    _k("use_heterogeneous_vocab", "proposal", "bool"),
    _k("enable_adaptive_verification", "proposal", "bool"),
    # Older releases only (kept so that old documents still validate; not exhaustively checked).
    _k("disable_by_batch_size", "proposal", "int", minimum=1),
    _k("speculative_token_tree", "proposal", "str"),
    _k(
        "acceptance_method",
        "proposal",
        "choice",
        choices=("rejection_sampler", "typical_acceptance_sampler"),
    ),
    _k("disable_mqa_scorer", "proposal", "bool"),
)

VLLM: Final = EngineTable(
    engine="vllm",
    program=("vllm", "serve"),
    flags=VLLM_FLAGS,
    proposal_keys=VLLM_SPECULATIVE_CONFIG_KEYS,
    document_keys=(_k("extra_args", "target", "list"),),
    known_versions=("0.6.0", "0.30.99"),
    unknown_flag_message="vllm serve: error: unrecognized arguments: {flag}",
    argument_exit_code=2,
)

# --- SGLang ---------------------------------------------------------------------------------------
# Source: reference/peer-formats.md §1.2 (SGLang server_args.py and its speculative-decoding docs).

SGLANG_ALGORITHMS: Final = ("EAGLE", "EAGLE3", "STANDALONE", "NGRAM", "NEXTN", "DFLASH")

SGLANG_FLAGS: Final[tuple[Flag, ...]] = (
    _f("--model-path --model", "model_path", "target", "str"),
    _f("--revision", "revision", "target", "str"),
    _f("--tokenizer-path", "tokenizer_path", "target", "str"),
    _f("--tokenizer-mode", "tokenizer_mode", "target", "choice", choices=("auto", "slow")),
    _f("--trust-remote-code", "trust_remote_code", "target", "bool"),
    _f(
        "--dtype",
        "dtype",
        "target",
        "choice",
        choices=("auto", "half", "float16", "bfloat16", "float", "float32"),
    ),
    _f("--quantization", "quantization", "target", "str"),
    _f("--kv-cache-dtype", "kv_cache_dtype", "target", "str", default="auto"),
    _f("--load-format", "load_format", "target", "str"),
    _f("--tp-size --tp", "tp_size", "target", "int", minimum=1, maximum=1024, default="1"),
    _f("--dp-size --dp", "dp_size", "target", "int", minimum=1, maximum=1024, default="1"),
    _f("--pp-size", "pp_size", "target", "int", minimum=1, maximum=1024, default="1"),
    _f("--ep-size", "ep_size", "target", "int", minimum=1, maximum=1024, default="1"),
    _f("--context-length", "context_length", "target", "int", minimum=1, maximum=10_000_000),
    _f(
        "--mem-fraction-static",
        "mem_fraction_static",
        "target",
        "float",
        minimum=0.0,
        exclusive_minimum=True,
        maximum=1.0,
    ),
    _f("--max-running-requests", "max_running_requests", "target", "int", minimum=1),
    _f("--max-total-tokens", "max_total_tokens", "target", "int", minimum=1),
    _f("--chunked-prefill-size", "chunked_prefill_size", "target", "int"),
    _f("--max-prefill-tokens", "max_prefill_tokens", "target", "int", minimum=1),
    _f("--schedule-policy", "schedule_policy", "target", "str", default="fcfs"),
    _f("--random-seed", "random_seed", "target", "int", minimum=0),
    _f("--attention-backend", "attention_backend", "target", "str"),
    _f("--disable-radix-cache", "disable_radix_cache", "target", "bool", default="false"),
    # Cached prompt tokens in the OpenAI routes' usage.prompt_tokens_details.
    _f("--enable-cache-report", "enable_cache_report", "target", "bool"),
    _f("--enable-dp-attention", "enable_dp_attention", "target", "bool"),
    _f("--disable-overlap-schedule", "disable_overlap_schedule", "target", "bool"),
    _f("--enable-mixed-chunk", "enable_mixed_chunk", "target", "bool"),
    _f("--enable-torch-compile", "enable_torch_compile", "target", "bool"),
    _f("--disable-cuda-graph", "disable_cuda_graph", "target", "bool"),
    _f("--cuda-graph-max-bs", "cuda_graph_max_bs", "target", "int", minimum=1),
    _f("--stream-interval", "stream_interval", "target", "int", minimum=1, default="1"),
    _f(
        "--incremental-streaming-output --stream-output",
        "incremental_streaming_output",
        "target",
        "bool",
    ),
    # Proposal.
    _f(
        "--speculative-algorithm",
        "speculative_algorithm",
        "proposal",
        "choice",
        choices=SGLANG_ALGORITHMS,
    ),
    _f("--speculative-draft-model-path", "speculative_draft_model_path", "proposal", "str"),
    _f(
        "--speculative-draft-model-revision",
        "speculative_draft_model_revision",
        "proposal",
        "str",
    ),
    _f(
        "--speculative-num-steps", "speculative_num_steps", "proposal", "int", minimum=1, maximum=64
    ),
    _f(
        "--speculative-eagle-topk",
        "speculative_eagle_topk",
        "proposal",
        "int",
        minimum=1,
        maximum=64,
    ),
    _f(
        "--speculative-num-draft-tokens",
        "speculative_num_draft_tokens",
        "proposal",
        "int",
        minimum=1,
        maximum=1024,
    ),
    _f(
        "--speculative-accept-threshold-single",
        "speculative_accept_threshold_single",
        "proposal",
        "float",
        minimum=0,
        maximum=1,
        default="1.0",
    ),
    _f(
        "--speculative-accept-threshold-acc",
        "speculative_accept_threshold_acc",
        "proposal",
        "float",
        minimum=0,
        maximum=1,
        default="1.0",
    ),
    _f("--speculative-token-map", "speculative_token_map", "proposal", "str"),
    _f(
        "--speculative-attention-mode",
        "speculative_attention_mode",
        "proposal",
        "choice",
        choices=("prefill", "decode"),
        default="prefill",
    ),
    _f(
        "--speculative-draft-attention-backend",
        "speculative_draft_attention_backend",
        "proposal",
        "str",
    ),
    _f(
        "--speculative-draft-model-quantization",
        "speculative_draft_model_quantization",
        "proposal",
        "str",
    ),
    _f("--speculative-draft-load-format", "speculative_draft_load_format", "proposal", "str"),
    _f("--speculative-moe-runner-backend", "speculative_moe_runner_backend", "proposal", "str"),
    _f("--speculative-moe-a2a-backend", "speculative_moe_a2a_backend", "proposal", "str"),
    _f(
        "--speculative-ngram-min-match-window-size",
        "speculative_ngram_min_match_window_size",
        "proposal",
        "int",
        minimum=1,
        default="1",
    ),
    _f(
        "--speculative-ngram-max-match-window-size",
        "speculative_ngram_max_match_window_size",
        "proposal",
        "int",
        minimum=1,
        default="12",
    ),
    _f(
        "--speculative-ngram-min-bfs-breadth",
        "speculative_ngram_min_bfs_breadth",
        "proposal",
        "int",
        minimum=1,
        default="1",
    ),
    _f(
        "--speculative-ngram-max-bfs-breadth",
        "speculative_ngram_max_bfs_breadth",
        "proposal",
        "int",
        minimum=1,
        default="10",
    ),
    _f(
        "--speculative-ngram-match-type",
        "speculative_ngram_match_type",
        "proposal",
        "choice",
        choices=("BFS", "PROB"),
        default="BFS",
    ),
    _f(
        "--speculative-ngram-max-trie-depth",
        "speculative_ngram_max_trie_depth",
        "proposal",
        "int",
        minimum=1,
        default="18",
    ),
    _f(
        "--speculative-ngram-capacity",
        "speculative_ngram_capacity",
        "proposal",
        "int",
        minimum=1,
        default="10000000",
    ),
    _f("--speculative-adaptive", "speculative_adaptive", "proposal", "bool"),
    _f("--speculative-adaptive-config", "speculative_adaptive_config", "proposal", "str"),
    # Server options.
    _f("--host", "host", "server", "str", default="127.0.0.1"),
    _f("--port", "port", "server", "int", minimum=0, maximum=65535, default="30000"),
    _f("--api-key", "api_key", "server", "str"),
    _f("--served-model-name", "served_model_name", "server", "str"),
    _f("--enable-metrics", "enable_metrics", "server", "bool"),
    _f("--log-level", "log_level", "server", "str", default="info"),
    _f("--decode-log-interval", "decode_log_interval", "server", "int", minimum=1, default="40"),
    _f("--log-requests", "log_requests", "server", "bool"),
)

SGLANG: Final = EngineTable(
    engine="sglang",
    program=("python", "-m", "sglang.launch_server"),
    flags=SGLANG_FLAGS,
    document_keys=(_k("extra_args", "target", "list"),),
    known_versions=("0.4.0", "0.5.99"),
    unknown_flag_message="launch_server.py: error: unrecognized arguments: {flag}",
    argument_exit_code=2,
)

# --- llama.cpp ------------------------------------------------------------------------------------
# The pinned build (llama-cpp-python 0.3.36 sdist, vendored llama.cpp 0c1e570): reference/
# real-engine.md §2.2 (measured on a running server; it wins where other notes disagree) and
# peer-formats.md §2.1 (the new flag generation).

LLAMACPP_PINNED_VERSION: Final = "0.3.36+0c1e570"
LLAMACPP_SPEC_TYPES: Final = (
    "none",
    "draft-simple",
    "draft-eagle3",
    "draft-mtp",
    "draft-dflash",
    "draft-dspark",
    "ngram-simple",
    "ngram-map-k",
    "ngram-map-k4v",
    "ngram-mod",
    "ngram-cache",
)
_REMOVED_N_MAX = "the argument has been removed. use --spec-draft-n-max or --spec-ngram-mod-n-max"
_REMOVED_N_MIN = "the argument has been removed. use --spec-draft-n-min or --spec-ngram-mod-n-min"


def _llama_removed(name: str, replacement: str, message: str) -> Flag:
    return Flag(
        names=(name,),
        key=name.lstrip("-").replace("-", "_"),
        section="proposal",
        type="int",
        renamed_to=replacement,
        removed_message=f'error while handling argument "{name}": {message}',
    )


LLAMACPP_FLAGS: Final[tuple[Flag, ...]] = (
    _f("--model -m", "model", "target", "str", help="target GGUF file (pin: model_sha256)"),
    _f("--ctx-size -c", "ctx_size", "target", "int", minimum=0, maximum=10_000_000),
    _f("--parallel -np", "parallel", "target", "int", minimum=1, maximum=4096),
    _f("--threads -t", "threads", "target", "int", minimum=1, maximum=4096),
    _f("--threads-batch -tb", "threads_batch", "target", "int", minimum=1, maximum=4096),
    _f("--batch-size -b", "batch_size", "target", "int", minimum=1, default="2048"),
    _f("--ubatch-size -ub", "ubatch_size", "target", "int", minimum=1, default="512"),
    _f("--gpu-layers --n-gpu-layers -ngl", "gpu_layers", "target", "str", numbers_as_text=True),
    _f(
        "--flash-attn -fa",
        "flash_attn",
        "target",
        "choice",
        choices=("on", "off", "auto"),
        default="auto",
    ),
    _f("--cache-type-k -ctk", "cache_type_k", "target", "str", default="f16"),
    _f("--cache-type-v -ctv", "cache_type_v", "target", "str", default="f16"),
    _f(
        "--cont-batching -cb",
        "cont_batching",
        "target",
        "bool",
        negations=("--no-cont-batching", "-nocb"),
    ),
    # The pinned build has no --mmap/--no-mmap/--mlock ("error: invalid argument"): model loading
    # is one option, checked against the real binary (tests/specportal/realengine).
    _f(
        "--load-mode -lm",
        "load_mode",
        "target",
        "choice",
        choices=("auto", "none", "mmap", "mlock", "mmap+mlock", "dio"),
        default="auto",
    ),
    _f("--jinja", "jinja", "target", "bool", negations=("--no-jinja",)),
    _f("--seed -s", "seed", "target", "int"),
    _f("--cache-reuse", "cache_reuse", "target", "int", minimum=0),
    _f("--kv-unified -kvu", "kv_unified", "target", "bool", negations=("--no-kv-unified",)),
    # Proposal (the new flag generation: --spec-*).
    _f(
        "--spec-type",
        "spec_type",
        "proposal",
        "choice",
        choices=LLAMACPP_SPEC_TYPES,
        multiple=True,
        default="none",
    ),
    _f("--spec-draft-model -md --model-draft", "spec_draft_model", "proposal", "str"),
    _f(
        "--spec-draft-n-max",
        "spec_draft_n_max",
        "proposal",
        "int",
        minimum=0,
        maximum=1024,
        default="3",
    ),
    _f(
        "--spec-draft-n-min",
        "spec_draft_n_min",
        "proposal",
        "int",
        minimum=0,
        maximum=1024,
        default="0",
    ),
    _f(
        "--spec-draft-p-min --draft-p-min",
        "spec_draft_p_min",
        "proposal",
        "float",
        minimum=0,
        maximum=1,
        default="0.00",
    ),
    _f(
        "--spec-draft-p-split --draft-p-split",
        "spec_draft_p_split",
        "proposal",
        "float",
        minimum=0,
        maximum=1,
        default="0.10",
    ),
    _f("--spec-draft-threads -td", "spec_draft_threads", "proposal", "int", minimum=1),
    _f("--spec-draft-ngl -ngld", "spec_draft_ngl", "proposal", "str", numbers_as_text=True),
    _f("--spec-draft-device -devd", "spec_draft_device", "proposal", "str"),
    _f("--spec-draft-type-k -ctkd", "spec_draft_type_k", "proposal", "str"),
    _f("--spec-draft-type-v -ctvd", "spec_draft_type_v", "proposal", "str"),
    _f("--spec-synth-len", "spec_synth_len", "proposal", "float", minimum=0),
    _f(
        "--spec-synth-rates",
        "spec_synth_rates",
        "proposal",
        "list",
        item_type="float",
        separator=",",
    ),
    _f(
        "--spec-ngram-mod-n-min", "spec_ngram_mod_n_min", "proposal", "int", minimum=0, default="48"
    ),
    _f(
        "--spec-ngram-mod-n-max", "spec_ngram_mod_n_max", "proposal", "int", minimum=0, default="64"
    ),
    _f(
        "--spec-ngram-mod-n-match",
        "spec_ngram_mod_n_match",
        "proposal",
        "int",
        minimum=0,
        default="24",
    ),
    _f("--spec-ngram-simple-size-n", "spec_ngram_simple_size_n", "proposal", "int", minimum=1),
    _f("--spec-ngram-simple-size-m", "spec_ngram_simple_size_m", "proposal", "int", minimum=1),
    _f("--spec-ngram-simple-min-hits", "spec_ngram_simple_min_hits", "proposal", "int", minimum=1),
    _f("--spec-ngram-map-k-size-n", "spec_ngram_map_k_size_n", "proposal", "int", minimum=1),
    _f("--spec-ngram-map-k-size-m", "spec_ngram_map_k_size_m", "proposal", "int", minimum=1),
    _f("--spec-ngram-map-k-min-hits", "spec_ngram_map_k_min_hits", "proposal", "int", minimum=1),
    _f("--spec-ngram-map-k4v-size-n", "spec_ngram_map_k4v_size_n", "proposal", "int", minimum=1),
    _f("--spec-ngram-map-k4v-size-m", "spec_ngram_map_k4v_size_m", "proposal", "int", minimum=1),
    _f(
        "--spec-ngram-map-k4v-min-hits", "spec_ngram_map_k4v_min_hits", "proposal", "int", minimum=1
    ),
    _f(
        "--spec-default",
        "spec_default",
        "proposal",
        "bool",
        help="ngram-mod with n_match 24, n_min 48, n_max 64",
    ),
    # Removed in the pinned build: the server exits with status 1 and this message.
    _llama_removed("--draft", "--spec-draft-n-max", _REMOVED_N_MAX),
    _llama_removed("--draft-n", "--spec-draft-n-max", _REMOVED_N_MAX),
    _llama_removed("--draft-max", "--spec-draft-n-max", _REMOVED_N_MAX),
    _llama_removed("--draft-min", "--spec-draft-n-min", _REMOVED_N_MIN),
    _llama_removed("--draft-n-min", "--spec-draft-n-min", _REMOVED_N_MIN),
    # Server options.
    _f("--host", "host", "server", "str", default="127.0.0.1"),
    _f("--port", "port", "server", "int", minimum=0, maximum=65535, default="8080"),
    _f("--api-key", "api_key", "server", "str"),
    _f("--alias -a", "alias", "server", "str"),
    _f("--metrics", "metrics", "server", "bool"),
    _f("--webui", "webui", "server", "bool", negations=("--no-webui",)),
    _f("--slots", "slots", "server", "bool", negations=("--no-slots",)),
    _f("--props", "props", "server", "bool"),
    _f("--timeout -to", "timeout", "server", "int", minimum=0),
    _f("--threads-http", "threads_http", "server", "int", minimum=-1),
    _f("--log-disable", "log_disable", "server", "bool"),
    _f("--verbose -v", "verbose", "server", "bool"),
)

LLAMACPP: Final = EngineTable(
    engine="llamacpp",
    program=("llama-server",),
    flags=LLAMACPP_FLAGS,
    document_keys=(
        _k("model_sha256", "target", "str", help="SHA-256 of the target GGUF file"),
        _k("extra_args", "target", "list"),
        _k("spec_draft_model_sha256", "proposal", "str", help="SHA-256 of the draft GGUF file"),
    ),
    known_versions=(LLAMACPP_PINNED_VERSION, LLAMACPP_PINNED_VERSION),
    unknown_flag_message="error: invalid argument: {flag}",
    argument_exit_code=1,
)

TABLES: Final[Mapping[str, EngineTable]] = {"vllm": VLLM, "sglang": SGLANG, "llamacpp": LLAMACPP}


def table(engine: str) -> EngineTable:
    try:
        return TABLES[engine]
    except KeyError:
        raise ValueError(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})") from None


# --- versions -------------------------------------------------------------------------------------

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(version: str) -> tuple[int, int, int] | None:
    """``"0.30.0"``, ``"v0.8.3rc1"``, ``"0.3.36+0c1e570"`` → ``(0, 30, 0)`` etc.; else None."""
    match = _VERSION.match(version.strip())
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def version_in_range(version: str | None, since: str | None, until: str | None) -> bool | None:
    """Whether ``since <= version < until``; None when the version is unknown or unparsable."""
    if version is None:
        return None
    parsed = parse_version(version)
    if parsed is None:
        return None
    if since is not None and parsed < (parse_version(since) or (0, 0, 0)):
        return False
    return not (until is not None and parsed >= (parse_version(until) or (0, 0, 0)))


def version_is_known(engine: str, version: str | None) -> bool:
    """Whether the tables describe this engine build (the linter warns otherwise)."""
    if version is None:
        return False
    tbl = table(engine)
    if engine == "llamacpp":
        # The binary reports no useful version: the build is named by the sdist and the commit.
        return version.strip() == LLAMACPP_PINNED_VERSION
    parsed = parse_version(version)
    low, high = (parse_version(v) for v in tbl.known_versions)
    return parsed is not None and low is not None and high is not None and low <= parsed <= high


# --- values ---------------------------------------------------------------------------------------


class ValueProblem(ValueError):
    """A value that does not fit its flag's type (message without the location)."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_value(flag: Flag, value: Any) -> Any:
    """Validate a document value against its flag; returns it with integral floats made ints.

    Raises :class:`ValueProblem` with a human message.
    """
    kind = flag.type
    if kind == "int":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not _is_int(value):
            raise ValueProblem(f"must be an integer, not {_describe(value)}")
        _check_range(flag, value)
        return value
    if kind == "float":
        if not _is_number(value):
            raise ValueProblem(f"must be a number, not {_describe(value)}")
        if isinstance(value, float) and value != value:  # NaN
            raise ValueProblem("must be a number, not NaN")
        _check_range(flag, value)
        return int(value) if isinstance(value, float) and value.is_integer() else value
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueProblem(f"must be true or false, not {_describe(value)}")
        return value
    if kind == "str":
        if flag.numbers_as_text and _is_int(value):
            return str(value)
        if not isinstance(value, str) or not value:
            raise ValueProblem(f"must be a non-empty string, not {_describe(value)}")
        return value
    if kind == "choice":
        if not isinstance(value, str):
            raise ValueProblem(f"must be a string, not {_describe(value)}")
        items = value.split(",") if flag.multiple else [value]
        for item in items:
            if item not in flag.choices:
                raise ValueProblem(
                    f"{item!r} is not one of {', '.join(flag.choices)}{_did_you_mean(item, flag.choices)}"
                )
        return value
    if kind == "list":
        if not isinstance(value, list):
            raise ValueProblem(f"must be a list, not {_describe(value)}")
        out = []
        for index, item in enumerate(value):
            try:
                out.append(_check_item(flag.item_type, item))
            except ValueProblem as exc:
                raise ValueProblem(f"item {index} {exc}") from None
        return out
    if kind == "json":
        if not isinstance(value, dict | list):
            raise ValueProblem(f"must be a JSON object or list, not {_describe(value)}")
        return value
    raise AssertionError(f"unhandled flag type {kind}")


def _check_item(item_type: str, item: Any) -> Any:
    if item_type == "int":
        if isinstance(item, float) and item.is_integer():
            item = int(item)
        if not _is_int(item):
            raise ValueProblem(f"must be an integer, not {_describe(item)}")
        return item
    if item_type == "float":
        if not _is_number(item):
            raise ValueProblem(f"must be a number, not {_describe(item)}")
        return int(item) if isinstance(item, float) and item.is_integer() else item
    if not isinstance(item, str):
        raise ValueProblem(f"must be a string, not {_describe(item)}")
    return item


def _check_range(flag: Flag, value: float) -> None:
    if flag.minimum is not None:
        if flag.exclusive_minimum and value <= flag.minimum:
            raise ValueProblem(f"must be greater than {_num(flag.minimum)}")
        if value < flag.minimum:
            raise ValueProblem(f"must be at least {_num(flag.minimum)}")
    if flag.maximum is not None and value > flag.maximum:
        raise ValueProblem(f"must be at most {_num(flag.maximum)}")


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return f"the string {value!r}"
    if _is_number(value):
        return f"the number {value}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _did_you_mean(word: str, candidates: Iterable[str]) -> str:
    import difflib

    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` or ``""``: the suffix used for unknown keys and flags."""
    return _did_you_mean(word, candidates)


def parse_text_value(flag: Flag, text: str) -> Any:
    """Turn a command-line token into the document value of ``flag``."""
    kind = flag.type
    try:
        if kind == "int":
            return _human_int(text) if flag.human_readable else int(text)
        if kind == "float":
            number = float(text)
            return int(number) if number.is_integer() else number
        if kind == "json":
            return json.loads(text)
        if kind == "list":
            items = text.split(flag.separator) if flag.separator else [text]
            return [_parse_item(flag.item_type, item) for item in items]
        if kind == "choice":
            return check_value(flag, text)
    except (ValueError, json.JSONDecodeError) as exc:
        raise ValueProblem(f"invalid value {text!r} ({exc})") from None
    return text


def flag_default(engine: str, section: Section, key: str) -> Any:
    """The engine's documented default for a document key, as a document value; ``MISSING``
    (from ``specportal.engines.reports``) when the table states none.

    Never filled into documents (defaults change between versions): the self-check compares a
    server's reported value with it when a configuration leaves the key unset.
    """
    from specportal.engines.reports import MISSING

    flag = table(engine).section_keys(section).get(key)
    if flag is None or flag.default is None:
        return MISSING
    if flag.type == "bool":
        return flag.default.strip().lower() == "true"
    return parse_text_value(flag, flag.default)


_SIZE_SUFFIX: Final = {"k": 1000, "m": 1000**2, "g": 1000**3, "K": 1024, "M": 1024**2, "G": 1024**3}


def _human_int(text: str) -> int:
    """vLLM's human-readable integers: lower-case suffixes are decimal, upper-case binary."""
    if text and text[-1] in _SIZE_SUFFIX:
        number = float(text[:-1]) * _SIZE_SUFFIX[text[-1]]
        if not number.is_integer():
            raise ValueError(f"{text!r} is not a whole number")
        return int(number)
    return int(text)


def _parse_item(item_type: str, text: str) -> Any:
    if item_type == "int":
        return int(text)
    if item_type == "float":
        number = float(text)
        return int(number) if number.is_integer() else number
    return text


def format_value(flag: Flag, value: Any) -> list[str]:
    """The argv tokens that carry ``value`` after the flag's name (empty for booleans)."""
    kind = flag.type
    if kind == "bool":
        return []
    if kind == "json":
        return [json.dumps(value, separators=(",", ":"), ensure_ascii=False)]
    if kind == "list":
        items = [_format_scalar(item) for item in value]
        return [flag.separator.join(items)] if flag.separator else items
    return [_format_scalar(value)]


def _format_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


# --- parsing argv ---------------------------------------------------------------------------------


class EngineArgumentError(ValueError):
    """The engine would refuse this command line: ``message`` is its wording."""

    def __init__(self, message: str, *, flag: str | None = None, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.flag = flag
        self.exit_code = exit_code


@dataclass
class ParsedArgs:
    """A parsed engine command line, keyed by document keys."""

    engine: Engine
    target: dict[str, Any] = field(default_factory=dict)
    proposal: dict[str, Any] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)
    # Unknown flags kept verbatim (only with ``allow_unknown=True``).
    extra_args: list[str] = field(default_factory=list)
    # Spellings seen, in order (documentation for logs: "non-default args").
    seen_flags: list[str] = field(default_factory=list)

    @property
    def values(self) -> dict[str, Any]:
        return {**self.server, **self.target, **self.proposal}

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


_PROGRAMS: Final[dict[str, tuple[tuple[str, ...], ...]]] = {
    "vllm": (("vllm", "serve"), ("python", "-m", "vllm.entrypoints.openai.api_server")),
    "sglang": (("python", "-m", "sglang.launch_server"), ("sglang", "serve")),
    "llamacpp": (("llama-server",),),
}
_PYTHON = re.compile(r"python(3(\.\d+)?)?")


def strip_program(engine: str, argv: Sequence[str]) -> list[str]:
    """Drop a leading program (``vllm serve``, ``python -m sglang.launch_server``, ...).

    The first word may be a path (``/opt/bin/llama-server``) or any ``python3.X``.
    """
    args = list(argv)
    if not args:
        return args
    first = args[0].rsplit("/", 1)[-1]
    if _PYTHON.fullmatch(first):
        first = "python"
    for program in _PROGRAMS[engine]:
        if (first, *args[1 : len(program)]) == program:
            return args[len(program) :]
    return args


def detect_engine(argv: Sequence[str]) -> Engine | None:
    """Which engine a command line starts (by its program), or None."""
    for engine in ENGINES:
        stripped = strip_program(engine, argv)
        if len(stripped) != len(argv):
            return engine
    return None


def parse_engine_argv(
    engine: str, argv: Sequence[str], *, version: str | None = None, allow_unknown: bool = False
) -> ParsedArgs:
    """Parse an engine's command line through the flag tables (see the module docstring).

    ``version`` gates flags by ``since``/``until``; without it every flag the tables know is
    accepted except the removed ones. Repeated flags keep the last value, as argparse and
    llama.cpp do.
    """
    tbl = table(engine)
    names = tbl.by_name()
    args = strip_program(engine, argv)
    parsed = ParsedArgs(engine=tbl.engine)
    index = 0
    positional_seen = False

    def fail(message: str, flag: str | None = None) -> EngineArgumentError:
        return EngineArgumentError(message, flag=flag, exit_code=tbl.argument_exit_code)

    while index < len(args):
        token = args[index]
        index += 1
        if not token.startswith("-") or token == "-":
            positional = next((f for f in tbl.flags if f.positional), None)
            if positional is not None and not positional_seen:
                positional_seen = True
                _store(parsed, positional, token)
                continue
            if allow_unknown:
                parsed.extra_args.append(token)
                continue
            raise fail(tbl.unknown_flag_message.format(flag=token), token)
        name, _, inline_text = token.partition("=")
        inline = inline_text if "=" in token else None
        if engine == "vllm" and name.startswith("--"):
            name = "--" + name[2:].replace("_", "-")
        flag = names.get(name)
        if (
            flag is not None
            and not flag.removed
            and version_in_range(version, flag.since, flag.until) is False
        ):
            flag = None
        if flag is None or flag.removed:
            if flag is not None and flag.removed and not allow_unknown:
                raise fail(flag.removed_message or "", name)
            if not allow_unknown:
                raise fail(tbl.unknown_flag_message.format(flag=name), name)
            # Keep the unknown flag and, heuristically, its value.
            parsed.extra_args.append(token)
            if inline is None and index < len(args) and not _looks_like_flag(args[index]):
                parsed.extra_args.append(args[index])
                index += 1
            continue
        parsed.seen_flags.append(name)
        if flag.type == "bool":
            if inline is not None:
                raise fail(_engine_value_error(tbl, name, inline, "takes no value"), name)
            _store(parsed, flag, name not in flag.negations)
            continue
        if inline is not None:
            text = inline
        else:
            if index >= len(args):
                raise fail(_engine_value_error(tbl, name, None, "expected one argument"), name)
            text = args[index]
            index += 1
        if flag.type == "list" and flag.separator is None and inline is None:
            items = [text]
            while index < len(args) and not _looks_like_flag(args[index]):
                items.append(args[index])
                index += 1
            value: Any = [_parse_item(flag.item_type, item) for item in items]
        else:
            try:
                value = parse_text_value(flag, text)
            except ValueProblem as exc:
                raise fail(_engine_value_error(tbl, name, text, str(exc)), name) from None
        _store(parsed, flag, value)
    return parsed


def _looks_like_flag(token: str) -> bool:
    return token.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?", token)


def _engine_value_error(tbl: EngineTable, name: str, text: str | None, problem: str) -> str:
    if tbl.engine == "llamacpp":
        return f'error while handling argument "{name}": {problem}'
    prefix = "vllm serve" if tbl.engine == "vllm" else "launch_server.py"
    if text is None:
        return f"{prefix}: error: argument {name}: {problem}"
    return f"{prefix}: error: argument {name}: invalid value: {text!r} ({problem})"


def _store(parsed: ParsedArgs, flag: Flag, value: Any) -> None:
    if flag.key == "speculative_config":
        if not isinstance(value, dict):
            raise EngineArgumentError(
                "vllm serve: error: argument --speculative-config: must be a JSON object",
                flag="--speculative-config",
            )
        parsed.proposal = dict(value)
        return
    getattr(parsed, flag.section)[flag.key] = value
