from __future__ import annotations

import pytest

from specportal.engines.flags import (
    LLAMACPP,
    SGLANG,
    TABLES,
    VLLM,
    EngineArgumentError,
    detect_engine,
    parse_engine_argv,
    version_in_range,
    version_is_known,
)


def test_every_spelling_belongs_to_one_flag_per_engine() -> None:
    for tbl in TABLES.values():
        seen: dict[str, str] = {}
        for flag in tbl.flags:
            for name in (*flag.names, *flag.negations):
                assert name not in seen, f"{tbl.engine}: {name} used by {seen[name]} and {flag.key}"
                seen[name] = flag.key


def test_document_keys_are_flag_names_with_underscores_and_prefixes_kept() -> None:
    for tbl in TABLES.values():
        for flag in tbl.flags:
            if flag.removed:
                continue
            long_names = [n for n in flag.names if n.startswith("--")]
            expected = {n[2:].replace("-", "_") for n in long_names}
            assert flag.key in expected, f"{tbl.engine}: {flag.key} from {flag.names}"


def test_vllm_argv_parses_aliases_inline_values_and_the_speculative_config_json() -> None:
    parsed = parse_engine_argv(
        "vllm",
        [
            "vllm",
            "serve",
            "org/target",
            "-tp",
            "4",
            "--max_model_len=8192",
            "--no-enable-prefix-caching",
            "--speculative-config",
            '{"method": "eagle3", "model": "org/head", "num_speculative_tokens": 5}',
            "--port",
            "8001",
            "--served-model-name",
            "a",
            "b",
        ],
    )
    assert parsed.target == {
        "model": "org/target",
        "tensor_parallel_size": 4,
        "max_model_len": 8192,
        "enable_prefix_caching": False,
    }
    assert parsed.proposal == {"method": "eagle3", "model": "org/head", "num_speculative_tokens": 5}
    assert parsed.server == {"port": 8001, "served_model_name": ["a", "b"]}
    assert parsed.get("tensor_parallel_size") == 4


def test_sglang_and_llamacpp_argv_parse_to_document_keys() -> None:
    sglang = parse_engine_argv(
        "sglang",
        [
            "python3.11",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "org/t",
            "--tp",
            "2",
            "--speculative-algorithm",
            "EAGLE3",
            "--speculative-eagle-topk",
            "1",
            "--enable-metrics",
        ],
    )
    assert sglang.target == {"model_path": "org/t", "tp_size": 2}
    assert sglang.proposal == {"speculative_algorithm": "EAGLE3", "speculative_eagle_topk": 1}
    assert sglang.server == {"enable_metrics": True}
    llama = parse_engine_argv(
        "llamacpp",
        [
            "/opt/bin/llama-server",
            "-m",
            "t.gguf",
            "-md",
            "d.gguf",
            "--spec-type",
            "draft-simple",
            "--spec-draft-p-min",
            "0.75",
            "-c",
            "4096",
            "-np",
            "1",
            "-t",
            "2",
            "--metrics",
            "--no-webui",
        ],
    )
    assert llama.target == {"model": "t.gguf", "ctx_size": 4096, "parallel": 1, "threads": 2}
    assert llama.proposal == {
        "spec_draft_model": "d.gguf",
        "spec_type": "draft-simple",
        "spec_draft_p_min": 0.75,
    }
    assert llama.server == {"metrics": True, "webui": False}


@pytest.mark.parametrize(
    ("flag", "hint"),
    [
        ("--draft", "--spec-draft-n-max or --spec-ngram-mod-n-max"),
        ("--draft-n", "--spec-draft-n-max or --spec-ngram-mod-n-max"),
        ("--draft-max", "--spec-draft-n-max or --spec-ngram-mod-n-max"),
        ("--draft-min", "--spec-draft-n-min or --spec-ngram-mod-n-min"),
        ("--draft-n-min", "--spec-draft-n-min or --spec-ngram-mod-n-min"),
    ],
)
def test_llamacpp_removed_flags_fail_with_the_servers_own_message(flag: str, hint: str) -> None:
    with pytest.raises(EngineArgumentError) as raised:
        parse_engine_argv("llamacpp", ["llama-server", "-m", "t.gguf", flag, "4"])
    assert raised.value.exit_code == 1
    assert raised.value.message == (
        f'error while handling argument "{flag}": the argument has been removed. use {hint}'
    )


def test_unknown_flags_fail_like_each_engine() -> None:
    with pytest.raises(EngineArgumentError) as vllm:
        parse_engine_argv("vllm", ["vllm", "serve", "m", "--frobnicate", "1"])
    assert (vllm.value.exit_code, vllm.value.message) == (
        2,
        "vllm serve: error: unrecognized arguments: --frobnicate",
    )
    with pytest.raises(EngineArgumentError) as llama:
        parse_engine_argv("llamacpp", ["llama-server", "--frobnicate"])
    assert (llama.value.exit_code, llama.value.message) == (
        1,
        "error: invalid argument: --frobnicate",
    )


def test_removed_vllm_speculative_flags_are_refused_and_bad_values_explained() -> None:
    with pytest.raises(EngineArgumentError, match="--speculative-model"):
        parse_engine_argv("vllm", ["m", "--speculative-model", "d"])
    with pytest.raises(EngineArgumentError, match="invalid value: 'four'"):
        parse_engine_argv("vllm", ["m", "-tp", "four"])


def test_unknown_flags_are_kept_verbatim_when_allowed() -> None:
    parsed = parse_engine_argv(
        "vllm", ["m", "--frobnicate", "1", "--flag-only", "-tp", "2"], allow_unknown=True
    )
    assert parsed.extra_args == ["--frobnicate", "1", "--flag-only"]
    assert parsed.target == {"model": "m", "tensor_parallel_size": 2}


def test_versions_gate_flags_and_unknown_builds_are_reported() -> None:
    assert version_in_range("0.30.0", "0.28.0", None) is True
    assert version_in_range("0.8.2", None, "0.8.3") is True
    assert version_in_range("0.8.3", None, "0.8.3") is False
    assert version_in_range("garbage", None, None) is None
    assert version_is_known("vllm", "0.30.0")
    assert not version_is_known("vllm", "9.0.0")
    assert version_is_known("llamacpp", "0.3.36+0c1e570")
    assert not version_is_known("llamacpp", "0.3.35+aaaaaaa")


def test_detect_engine_by_program() -> None:
    assert detect_engine(["vllm", "serve", "m"]) == "vllm"
    assert detect_engine(["python", "-m", "sglang.launch_server"]) == "sglang"
    assert detect_engine(["./build/bin/llama-server", "-m", "x"]) == "llamacpp"
    assert detect_engine(["ollama", "run"]) is None
    assert {VLLM.engine, SGLANG.engine, LLAMACPP.engine} == set(TABLES)


def test_human_readable_lengths_and_layer_counts_parse_like_the_engines() -> None:
    vllm = parse_engine_argv("vllm", ["m", "--max-model-len", "32k"])
    assert vllm.target["max_model_len"] == 32000
    assert parse_engine_argv("vllm", ["m", "--max-model-len=32K"]).target["max_model_len"] == 32768
    with pytest.raises(EngineArgumentError):
        parse_engine_argv("vllm", ["m", "--max-model-len", "lots"])
    llama = parse_engine_argv("llamacpp", ["llama-server", "-m", "t.gguf", "-ngl", "all"])
    assert llama.target["gpu_layers"] == "all"
