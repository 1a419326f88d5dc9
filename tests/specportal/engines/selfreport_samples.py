"""Self-report samples shared by the parser, comparison and fetching tests.

Bodies and lines are captured from the emulator (``specportal emulate``) and the real
``llama-server`` of ``specportal real-engine``; the vLLM start-up line follows ``VllmConfig.__str__``
and ``SpeculativeConfig.__repr__`` of vLLM's source.
"""

from __future__ import annotations

from typing import Any

REVISION = "0e9e39f249a16976918f6564b8830bc894c89659"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"

# Captured from `specportal emulate --flavor vllm` started from a launch command.
EMULATOR_VLLM_ARGS = (
    "(APIServer pid=18502) INFO 11-29 20:20:00 [utils.py:233] non-default args: {'host': "
    "'127.0.0.1', 'port': 59005, 'model': 'meta-llama/Llama-3.1-8B-Instruct', 'revision': "
    "'0e9e39f249a16976918f6564b8830bc894c89659', 'max_model_len': 8192, 'speculative_config': "
    "{'method': 'ngram', 'num_speculative_tokens': 4, 'prompt_lookup_max': 4, "
    "'prompt_lookup_min': 4}}"
)
# vLLM's EngineCore start-up line: VllmConfig.__str__ (some values repr'd, some bare).
REAL_VLLM_INIT = (
    "(EngineCore_DP0 pid=178) INFO 11-02 04:20:48 [core.py:77] Initializing a V1 LLM engine "
    "(v0.30.0) with config: model='meta-llama/Llama-3.1-8B-Instruct', "
    "speculative_config=SpeculativeConfig(method='eagle3', "
    "model='yuhuili/EAGLE3-LLaMA3.1-Instruct-8B', num_spec_tokens=5), "
    "tokenizer='meta-llama/Llama-3.1-8B-Instruct', skip_tokenizer_init=False, tokenizer_mode=auto, "
    f"revision={REVISION}, tokenizer_revision=None, trust_remote_code=False, "
    "dtype=torch.bfloat16, max_seq_len=4096, download_dir=None, load_format=auto, "
    "tensor_parallel_size=2, pipeline_parallel_size=1, data_parallel_size=1, "
    "disable_custom_all_reduce=False, quantization=None, enforce_eager=False, "
    "kv_cache_dtype=auto, device_config=cuda, "
    "structured_outputs_config=StructuredOutputsConfig(backend='auto', "
    "disable_any_whitespace=False, reasoning_parser=''), "
    "observability_config=ObservabilityConfig(show_hidden_metrics_for_version=None), seed=0, "
    "served_model_name=meta-llama/Llama-3.1-8B-Instruct, enable_prefix_caching=True, "
    "enable_chunked_prefill=True, pooler_config=None, "
    "compilation_config={'level': 3, 'cudagraph_capture_sizes': [4, 2, 1], 'custom_ops': ['none']}"
)
# /v1/models of a real vLLM (reference/vllm-formats.md §5.2), max_model_len as served.
VLLM_MODELS: dict[str, Any] = {
    "object": "list",
    "data": [
        {
            "id": MODEL,
            "object": "model",
            "owned_by": "vllm",
            "root": MODEL,
            "parent": None,
            "max_model_len": 4096,
        }
    ],
}
# Captured from `specportal emulate --flavor sglang` (EAGLE3, 3 steps, top-k 1).
SGLANG_INFO = {
    "model_path": MODEL,
    "tokenizer_path": MODEL,
    "served_model_name": MODEL,
    "tp_size": 1,
    "dp_size": 1,
    "context_length": 8192,
    "mem_fraction_static": 0.88,
    "max_running_requests": 1024,
    "max_total_tokens": 391168,
    "chunked_prefill_size": 8192,
    "disable_radix_cache": False,
    "random_seed": None,
    "speculative_algorithm": "EAGLE3",
    "speculative_draft_model_path": "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
    "internal_states": [{"last_gen_throughput": 0.0, "load": 0}],
    "version": "0.5.6",
}
# The window lines: the emulator's (LOG_INF form) and the pinned llama-server's draft-simple
# implementation (SPC_TRC: "spec %12.*s: - n_max=%d, n_min=%d, p_min=%f").
EMULATOR_LLAMACPP_WINDOW = "common_speculative_init: - n_max=8, n_min=0, p_min=0.75"
REAL_LLAMACPP_WINDOW = "spec common_specu: - n_max=4, n_min=0, p_min=0.750000"


def vllm_document(**proposal: Any) -> dict[str, Any]:
    return {
        "schema": 1,
        "engine": "vllm",
        "engine_build": {"version": "0.30.0"},
        "target": {"model": MODEL, "revision": REVISION, "max_model_len": 4096},
        "proposal": proposal,
        "sampling": {"temperature": 0},
    }


def by_path(found: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for entry in found:
        out.setdefault(entry["path"], []).append(entry)
    return out


def llamacpp_document(**proposal: Any) -> dict[str, Any]:
    return {
        "schema": 1,
        "engine": "llamacpp",
        "engine_build": {"version": "0.3.36+0c1e570"},
        "target": {"model": "/models/target.gguf", "ctx_size": 2048, "parallel": 2},
        "proposal": proposal,
    }


def llamacpp_props(n_ctx: int = 1024, slots: int = 2, build: str = "b1-0c1e570") -> Any:
    return {
        "default_generation_settings": {"n_ctx": n_ctx, "params": {"speculative.types": "none"}},
        "total_slots": slots,
        "model_path": "/models/./target.gguf",
        "build_info": build,
    }
