"""The GGUF writer: deterministic, loadable, with the logit-bias channel and the embedded pair."""

from __future__ import annotations

import math
from pathlib import Path

import gguf
import numpy as np
import pytest

from specportal.realengine import bpe, gguf_models
from specportal.realengine.gguf_models import Model, Shape


def test_tokenizer_training_is_deterministic_and_every_merge_is_a_token() -> None:
    first, second = bpe.train(), bpe.train()
    assert first == second
    tokens = set(first.tokens)
    for merge in first.merges:
        left, right = merge.split(" ")
        assert left + right in tokens
    assert first.tokens[-3:] == bpe.CONTROL_TOKENS
    # Byte tokens keep id = byte value, as llama.cpp's byte-level BPE expects.
    assert first.token_bytes[ord("a")] == b"a"


def test_bias_channel_bans_exactly_the_control_and_non_printable_tokens() -> None:
    vocab = bpe.train()
    model = gguf_models.random_model(gguf_models.TINY, vocab, np.random.default_rng(0))
    bias = model.tensors["output.weight"][:, 0]
    for token_id in range(len(vocab)):
        banned = token_id in vocab.control_ids or not vocab.is_plain_text(token_id)
        assert bias[token_id] == (gguf_models.BANNED_LOGIT if banned else 0.0)
    assert (model.tensors["token_embd.weight"][:, 0] == 1.0).all()
    for i in range(model.shape.n_layer):
        # Nothing writes into residual dim 0, so it stays the constant the bias multiplies.
        assert not model.tensors[f"blk.{i}.attn_output.weight"][0].any()
        assert not model.tensors[f"blk.{i}.ffn_down.weight"][0].any()


def test_noise_is_relative_to_each_tensors_std_without_the_bias_channel() -> None:
    vocab = bpe.train()
    model = gguf_models.random_model(gguf_models.TINY, vocab, np.random.default_rng(1))
    noisy = gguf_models.noisy_copy(model, 0.05, np.random.default_rng(2))
    out, noisy_out = model.tensors["output.weight"], noisy.tensors["output.weight"]
    assert (noisy_out[:, 0] == out[:, 0]).all()  # the bias column is left exact
    relative = (noisy_out[:, 1:] - out[:, 1:]).std() / out[:, 1:].std()
    assert relative == pytest.approx(0.05, rel=0.1)
    assert not noisy.tensors["blk.0.ffn_down.weight"][0].any()


def _silu(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = x / (1.0 + np.exp(-x))
    return out


def _rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    out: np.ndarray = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * weight
    return out


def _first_token_logits(model: Model) -> np.ndarray:
    """Every token's logits as the first token of a sequence (attention over itself is just V)."""
    t = {k: v.astype(np.float64) for k, v in model.tensors.items()}
    x = t["token_embd.weight"].copy()
    for i in range(model.shape.n_layer):
        h = _rms_norm(x, t[f"blk.{i}.attn_norm.weight"], model.rms_eps)
        x = x + (h @ t[f"blk.{i}.attn_v.weight"].T) @ t[f"blk.{i}.attn_output.weight"].T
        h = _rms_norm(x, t[f"blk.{i}.ffn_norm.weight"], model.rms_eps)
        gate = _silu(h @ t[f"blk.{i}.ffn_gate.weight"].T) * (h @ t[f"blk.{i}.ffn_up.weight"].T)
        x = x + gate @ t[f"blk.{i}.ffn_down.weight"].T
    return _rms_norm(x, t["output_norm.weight"], model.rms_eps) @ t["output.weight"].T


def test_the_embedded_target_computes_its_drafts_function_at_mix_zero_and_drifts_with_mix() -> None:
    vocab = bpe.train()
    draft = gguf_models.random_model(gguf_models.TINY, vocab, np.random.default_rng(3))
    wide = Shape(n_embd=256, n_layer=3, n_head=16, n_ff=512)
    exact = gguf_models.embed(draft, wide, vocab, mix=0.0, seed=0)
    drifted = gguf_models.embed(draft, wide, vocab, mix=0.5, seed=0)
    want = _first_token_logits(draft)
    np.testing.assert_allclose(_first_token_logits(exact), want, rtol=1e-9, atol=1e-6)
    same_choice = (_first_token_logits(drifted).argmax(1) == want.argmax(1)).mean()
    assert 0.0 < same_choice < 1.0


def test_model_set_is_deterministic_from_the_seed_and_loads_as_gguf(tmp_path: Path) -> None:
    first = gguf_models.write_model_set(tmp_path / "a", seed=7, include_pair=False)
    again = gguf_models.write_model_set(tmp_path / "b", seed=7, include_pair=False)
    other = gguf_models.write_model_set(tmp_path / "c", seed=8, include_pair=False)
    assert [f.sha256 for f in first] == [f.sha256 for f in again]
    assert first[0].sha256 != other[0].sha256
    assert gguf_models.read_manifest(tmp_path / "a") == first
    for item in first:
        assert gguf_models.sha256_file(tmp_path / "a" / item.path) == item.sha256

    reader = gguf.GGUFReader(tmp_path / "a" / "tiny" / "target.gguf")
    fields = reader.fields
    assert fields["general.architecture"].contents() == "llama"
    assert fields["tokenizer.ggml.model"].contents() == "gpt2"
    assert fields["tokenizer.ggml.pre"].contents() == "gpt-2"
    assert fields["tokenizer.chat_template"].contents() == bpe.CHATML_TEMPLATE
    assert fields["tokenizer.ggml.add_bos_token"].contents() is False
    vocab = bpe.train()
    assert fields["tokenizer.ggml.tokens"].contents() == list(vocab.tokens)
    assert fields["tokenizer.ggml.eos_token_id"].contents() == vocab.eos_id
    tensors = {t.name: t for t in reader.tensors}
    output = np.asarray(tensors["output.weight"].data)
    assert output.shape == (len(vocab), gguf_models.TINY.n_embd)
    assert output[vocab.eot_id, 0] == gguf_models.BANNED_LOGIT


def test_pair_target_is_large_and_drafts_are_noisy_copies_of_the_embedded_draft(
    tmp_path: Path,
) -> None:
    small_target = Shape(n_embd=128, n_layer=2, n_head=8, n_ff=256)
    files = gguf_models.write_model_set(
        tmp_path, seed=1, pair_target=small_target, pair_noise=(0.1,), pair_dtype="f16"
    )
    pair = {f.agreement: f for f in files if f.set == "pair"}
    assert set(pair) == {"target", "copy", "noise-0.1"}
    assert pair["target"].dtype == "f16"
    assert pair["target"].shape["n_embd"] == 128
    assert pair["copy"].shape == pair["noise-0.1"].shape
    assert pair["copy"].shape["n_embd"] == 64
    assert math.isclose(pair["noise-0.1"].noise or 0.0, 0.1)
