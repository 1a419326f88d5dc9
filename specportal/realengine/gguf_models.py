"""Random-weight Llama GGUF models for a real llama-server: targets, drafts, and an embedded pair.

Two details make these a clean benchmark target (reference/real-engine.md §3.1):

* **A logit-bias channel.** Residual dimension 0 is 1 in every token embedding and no layer writes
  to it, so column 0 of ``output.weight`` is a per-token logit bias. Control tokens and tokens with
  bytes outside printable ASCII/newline get −1e4 there: no request ever stops early (every request
  runs to ``max_tokens``) and every token decodes to non-empty text (one stream chunk per token).
* **Noise relative to each tensor's std**, computed over the free entries only (the bias column
  would make a "5 %" draft useless).

The **embedded pair** (§3.3): a wide target T computes exactly a small draft D's function at T's
full cost. T's residual dims 0..d−1 carry D's residual stream and the rest stay 0; RMSNorm weights
are scaled by √(d/D) to undo the larger normaliser; D's heads and FFN units sit in T's first layers;
everything else in T is random with output projections scaled by ``mix`` (0: T ≡ D up to rounding).
Agreement levels then come from *noisy copies of D* against one fixed T, so the arms of an
experiment differ only in the proposal.

Everything is a pure function of the seed.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from specportal.realengine import bpe

Array = npt.NDArray[np.float32]

GENERATOR_VERSION = 1
BANNED_LOGIT = -1.0e4
RMS_EPS = 1e-5
HEAD_DIM = 16


@dataclass(frozen=True)
class Shape:
    n_embd: int
    n_layer: int
    n_head: int
    n_ff: int
    n_ctx: int = 4096

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


TINY = Shape(n_embd=64, n_layer=2, n_head=4, n_ff=256)
# The expensive target of the pair: ≈ 27.6 M parameters, ≈ 150 tok/s on 2 cores in F32.
PAIR_TARGET = Shape(n_embd=512, n_layer=8, n_head=32, n_ff=1536)

# Draft noise levels written by default, as fractions of each tensor's std.
TINY_NOISE_LEVELS: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2, 0.5)
PAIR_NOISE_LEVELS: tuple[float, ...] = (0.02, 0.05, 0.1)


def _layer_names(i: int) -> dict[str, str]:
    return {
        key: f"blk.{i}.{key}.weight"
        for key in (
            "attn_norm",
            "attn_q",
            "attn_k",
            "attn_v",
            "attn_output",
            "ffn_norm",
            "ffn_gate",
            "ffn_up",
            "ffn_down",
        )
    }


@dataclass
class Model:
    shape: Shape
    tensors: dict[str, Array]
    rms_eps: float = RMS_EPS


def _normal(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> Array:
    return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)


def logit_bias(vocab: bpe.Vocabulary) -> Array:
    bias = np.zeros(len(vocab), dtype=np.float32)
    for token_id in range(len(vocab)):
        if not vocab.is_plain_text(token_id):
            bias[token_id] = BANNED_LOGIT
    return bias


def random_model(
    shape: Shape,
    vocab: bpe.Vocabulary,
    rng: np.random.Generator,
    *,
    output_scale: float = 1.0,
    logit_scale: float = 4.0,
) -> Model:
    """A random Llama whose residual dim 0 is the logit-bias channel.

    ``output_scale`` multiplies every projection that writes into the residual stream (used by the
    embedded pair's ``mix``); ``logit_scale`` sharpens the output distribution so greedy choices
    are rarely near-ties.
    """
    d, n_vocab = shape.n_embd, len(vocab)
    qkv = shape.n_head * shape.head_dim
    tensors: dict[str, Array] = {}
    embd = _normal(rng, (n_vocab, d), 1.0)
    embd[:, 0] = 1.0
    tensors["token_embd.weight"] = embd
    for i in range(shape.n_layer):
        names = _layer_names(i)
        tensors[names["attn_norm"]] = np.ones(d, dtype=np.float32)
        tensors[names["attn_q"]] = _normal(rng, (qkv, d), 1 / math.sqrt(d))
        tensors[names["attn_k"]] = _normal(rng, (qkv, d), 1 / math.sqrt(d))
        tensors[names["attn_v"]] = _normal(rng, (qkv, d), 1 / math.sqrt(d))
        attn_out = _normal(rng, (d, qkv), output_scale / math.sqrt(qkv))
        attn_out[0, :] = 0.0
        tensors[names["attn_output"]] = attn_out
        tensors[names["ffn_norm"]] = np.ones(d, dtype=np.float32)
        tensors[names["ffn_gate"]] = _normal(rng, (shape.n_ff, d), 1 / math.sqrt(d))
        tensors[names["ffn_up"]] = _normal(rng, (shape.n_ff, d), 1 / math.sqrt(d))
        down = _normal(rng, (d, shape.n_ff), output_scale / math.sqrt(shape.n_ff))
        down[0, :] = 0.0
        tensors[names["ffn_down"]] = down
    tensors["output_norm.weight"] = np.ones(d, dtype=np.float32)
    output = _normal(rng, (n_vocab, d), logit_scale / math.sqrt(d))
    output[:, 0] = logit_bias(vocab)
    tensors["output.weight"] = output
    return Model(shape=shape, tensors=tensors)


def _free_mask(name: str, tensor: Array) -> npt.NDArray[np.bool_]:
    """Entries that carry learned-like values (not the bias channel or its zero rows)."""
    mask = np.ones(tensor.shape, dtype=bool)
    if name in ("token_embd.weight", "output.weight"):
        mask[:, 0] = False
    elif name.endswith(("attn_output.weight", "ffn_down.weight")):
        mask[0, :] = False
    return mask


def noisy_copy(model: Model, noise: float, rng: np.random.Generator) -> Model:
    """Each matrix plus Gaussian noise of ``noise`` × its std, the bias channel left exact."""
    tensors: dict[str, Array] = {}
    for name, tensor in model.tensors.items():
        out = tensor.copy()
        if tensor.ndim == 2 and noise > 0:
            mask = _free_mask(name, tensor)
            std = float(tensor[mask].std())
            out[mask] += _normal(rng, (int(mask.sum()),), noise * std)
        tensors[name] = out
    return Model(shape=model.shape, tensors=tensors, rms_eps=model.rms_eps)


def embed(draft: Model, shape: Shape, vocab: bpe.Vocabulary, *, mix: float, seed: int) -> Model:
    """A target of ``shape`` that computes ``draft``'s function (exactly when ``mix`` is 0)."""
    small = draft.shape
    if small.head_dim != shape.head_dim:
        raise ValueError("the draft and the target must have the same head_dim")
    if (
        shape.n_embd < small.n_embd
        or shape.n_layer < small.n_layer
        or shape.n_head < small.n_head
        or shape.n_ff < small.n_ff
    ):
        raise ValueError("the target must be at least as large as the draft in every dimension")
    rng = np.random.default_rng([seed, 0x7A26E7])
    target = random_model(shape, vocab, rng, output_scale=mix)
    t = target.tensors
    src = draft.tensors
    d, big = small.n_embd, shape.n_embd
    heads = small.n_head * small.head_dim
    # RMSNorm over `big` dims of a vector that is zero outside the first `d`: its rms is
    # √(d/big) times the draft's, so the norm weights shrink by the same factor.
    norm_scale = np.float32(math.sqrt(d / big))
    embd = np.zeros((len(vocab), big), dtype=np.float32)
    embd[:, :d] = src["token_embd.weight"]
    t["token_embd.weight"] = embd
    for i in range(small.n_layer):
        names = _layer_names(i)
        for key in ("attn_norm", "ffn_norm"):
            t[names[key]][:d] = src[names[key]] * norm_scale
        for key in ("attn_q", "attn_k", "attn_v"):
            t[names[key]][:heads, :d] = src[names[key]]
        # Output projections were already scaled by `mix` (0: only the draft's blocks write).
        attn_out = t[names["attn_output"]]
        attn_out[:d, :heads] = src[names["attn_output"]]
        attn_out[0, :] = 0.0
        for key in ("ffn_gate", "ffn_up"):
            t[names[key]][: small.n_ff, :d] = src[names[key]]
        down = t[names["ffn_down"]]
        down[:d, : small.n_ff] = src[names["ffn_down"]]
        down[0, :] = 0.0
    t["output_norm.weight"][:d] = src["output_norm.weight"] * norm_scale
    output = t["output.weight"]
    output[:, d:] *= np.float32(mix)
    output[:, :d] = src["output.weight"]
    # The eps inside the norm's square root is not rescaled by the weights; scaling it too makes
    # T's normalised activations equal D's exactly, not just up to eps.
    target.rms_eps = draft.rms_eps * d / big
    return target


def write_gguf(
    path: Path,
    model: Model,
    vocab: bpe.Vocabulary,
    *,
    name: str,
    dtype: str = "f32",
) -> None:
    """Write ``model`` as a llama-architecture GGUF with the byte-level BPE and ChatML template."""
    import gguf  # the `realengine` extra; imported here so the rest of the package needs only numpy

    if dtype not in ("f32", "f16"):
        raise ValueError(f"dtype must be f32 or f16, not {dtype!r}")
    shape = model.shape
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(name)
    writer.add_context_length(shape.n_ctx)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_layer_norm_rms_eps(model.rms_eps)
    writer.add_vocab_size(len(vocab))
    writer.add_file_type(
        gguf.LlamaFileType.ALL_F32 if dtype == "f32" else gguf.LlamaFileType.MOSTLY_F16
    )
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(list(vocab.tokens))
    writer.add_token_types(
        [
            gguf.TokenType.CONTROL if i in vocab.control_ids else gguf.TokenType.NORMAL
            for i in range(len(vocab))
        ]
    )
    writer.add_token_merges(list(vocab.merges))
    writer.add_bos_token_id(vocab.bos_id)
    writer.add_eos_token_id(vocab.eos_id)
    writer.add_eot_token_id(vocab.eot_id)
    writer.add_add_bos_token(False)
    writer.add_chat_template(bpe.CHATML_TEMPLATE)
    for tensor_name, tensor in model.tensors.items():
        # Norm vectors stay F32 (llama.cpp's convention for 1-D tensors, MOSTLY_F16 included).
        data = tensor.astype(np.float16) if dtype == "f16" and tensor.ndim == 2 else tensor
        writer.add_tensor(tensor_name, np.ascontiguousarray(data))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class ModelFile:
    """One written file, as listed in ``manifest.json``."""

    path: str  # relative to the output directory
    set: str  # "tiny" or "pair"
    role: str  # "target" or "draft"
    agreement: str  # "copy", "noise-0.05", "independent", or "target"
    noise: float | None
    dtype: str
    shape: dict[str, int]
    sha256: str
    bytes: int


def write_model_set(
    out: Path,
    *,
    seed: int = 0,
    tiny_noise: Sequence[float] = TINY_NOISE_LEVELS,
    pair_noise: Sequence[float] = PAIR_NOISE_LEVELS,
    pair_target: Shape = PAIR_TARGET,
    pair_mix: float = 0.0,
    pair_dtype: str = "f32",
    include_pair: bool = True,
) -> list[ModelFile]:
    """Write the tiny set and the embedded pair under ``out`` plus ``manifest.json``.

    ``out/tiny/``: ``target.gguf``, ``draft-copy.gguf``, ``draft-noise-<level>.gguf`` and
    ``draft-independent.gguf`` (for acceptance and correctness; speculation is slower here).
    ``out/pair/``: one expensive ``target.gguf`` containing ``draft-copy.gguf``, and
    ``draft-noise-<level>.gguf`` noisy copies of it (for a real speed-up).
    """
    vocab = bpe.train()
    files: list[ModelFile] = []

    def emit(
        model: Model, rel: str, set_name: str, role: str, agreement: str, noise: float | None
    ) -> None:
        dtype = pair_dtype if (set_name, role) == ("pair", "target") else "f32"
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        write_gguf(
            path, model, vocab, name=f"specportal-{set_name}-{role}-{agreement}", dtype=dtype
        )
        files.append(
            ModelFile(
                path=rel,
                set=set_name,
                role=role,
                agreement=agreement,
                noise=noise,
                dtype=dtype,
                shape=asdict(model.shape),
                sha256=sha256_file(path),
                bytes=path.stat().st_size,
            )
        )

    tiny = random_model(TINY, vocab, np.random.default_rng([seed, 1]))
    emit(tiny, "tiny/target.gguf", "tiny", "target", "target", None)
    emit(tiny, "tiny/draft-copy.gguf", "tiny", "draft", "copy", 0.0)
    for level in tiny_noise:
        noisy = noisy_copy(tiny, level, np.random.default_rng([seed, 2, round(level * 1e6)]))
        emit(noisy, f"tiny/draft-noise-{level:g}.gguf", "tiny", "draft", f"noise-{level:g}", level)
    independent = random_model(TINY, vocab, np.random.default_rng([seed, 3]))
    emit(independent, "tiny/draft-independent.gguf", "tiny", "draft", "independent", None)

    if include_pair:
        small = random_model(TINY, vocab, np.random.default_rng([seed, 4]))
        target = embed(small, pair_target, vocab, mix=pair_mix, seed=seed)
        emit(target, "pair/target.gguf", "pair", "target", "target", None)
        emit(small, "pair/draft-copy.gguf", "pair", "draft", "copy", 0.0)
        for level in pair_noise:
            noisy = noisy_copy(small, level, np.random.default_rng([seed, 5, round(level * 1e6)]))
            emit(
                noisy,
                f"pair/draft-noise-{level:g}.gguf",
                "pair",
                "draft",
                f"noise-{level:g}",
                level,
            )

    manifest: dict[str, Any] = {
        "generator_version": GENERATOR_VERSION,
        "seed": seed,
        "pair_mix": pair_mix,
        "vocab_size": len(vocab),
        "files": [asdict(f) for f in files],
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return files


def read_manifest(out: Path) -> list[ModelFile]:
    data = json.loads((out / "manifest.json").read_text())
    return [ModelFile(**entry) for entry in data["files"]]
