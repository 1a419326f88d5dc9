"""The peer benchmark tools, installed from PyPI into virtual environments of their own.

They stay out of the project's ``.venv`` (their dependencies — torch, transformers, pydantic
majors — would fight SpecPortal's) and are cached under ``~/.cache/specportal/peers/NAME`` (or
``$SPECPORTAL_PEERS_DIR``): made once, then reused while the stamp file says the same requirements.
None of them may fetch a tokenizer from a hub, so ``tokenizer_folder`` writes a local one (a
word-level tokenizer over the toy tokenizer's vocabulary) with the tool's own ``transformers``.

Also a command line for the SGLang fixture script (``scripts/sglang-bench-fixture``)::

    python -m tests.specportal.formats.peers sglang-fixture OUT_DIR
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# One pip command per step; torch first, so that pip takes the CPU wheel on this machine's disk
# instead of resolving a multi-gigabyte CUDA build for it.
GUIDELLM = ("guidellm-0.8.1", (("torch==2.13.0", "guidellm==0.8.1"),))
AIPERF = ("aiperf-0.13.0", (("aiperf==0.13.0",),))
# SGLang's client is installed without its dependencies (they run to gigabytes of GPU kernels);
# these are what ``python -m sglang.bench_serving`` imports at start-up, found by running it.
# torchvision is among them, and PyPI's torchvision only imports beside torch 2.14.1.
SGLANG = (
    "sglang-0.5.23",
    (
        ("torch==2.14.1", "torchvision==0.29.1"),
        ("--no-deps", "sglang==0.5.23"),
        (
            "numpy",
            "orjson",
            "psutil",
            "pybase64",
            "requests",
            "triton",
            "packaging",
            "pillow",
            "starlette",
            "msgspec",
            "pydantic",
            "pyzmq",
            "tqdm",
            "ipython",
            "aiohttp",
            "transformers",
            "datasets",
            "apache-tvm-ffi",
            "sentencepiece",
            "compressed-tensors",
            "gguf",
        ),
    ),
)

TOKENIZER_SCRIPT = r"""
import json, sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
out, words = sys.argv[1], json.load(open(sys.argv[2]))
vocab = {"<unk>": 0, "<|endoftext|>": 1}
for w in words:
    vocab.setdefault(w, len(vocab))
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.decoder = decoders.WordPiece(prefix="##")
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|endoftext|>",
                               model_max_length=32768)
fast.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
fast.save_pretrained(out)
"""


def peers_dir() -> Path:
    return Path(os.environ.get("SPECPORTAL_PEERS_DIR", Path.home() / ".cache/specportal/peers"))


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_venv(spec: tuple[str, tuple[tuple[str, ...], ...]], log: Path | None = None) -> Path:
    """The tool's venv, made (once) with its pinned requirements; returns its ``bin`` folder."""
    name, steps = spec
    root = peers_dir() / name
    stamp = root / ".specportal-ready"
    wanted = json.dumps([list(step) for step in steps])
    with _locked(peers_dir() / f".{name}.lock"):
        if stamp.exists() and stamp.read_text() == wanted:
            return root / "bin"
        building = root.with_name(root.name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(building)], check=True)
        out = log.open("ab") if log else subprocess.DEVNULL
        try:
            for step in steps:
                subprocess.run(
                    [str(building / "bin" / "pip"), "install", "-q", *step],
                    check=True, stdout=out, stderr=subprocess.STDOUT,
                )  # fmt: skip
        finally:
            if log:
                out.close()  # type: ignore[union-attr]
        shutil.rmtree(root, ignore_errors=True)
        building.rename(root)
        # A venv's scripts name its folder: rewrite them for the final path.
        for script in (root / "bin").iterdir():
            if script.is_file() and not script.is_symlink():
                try:
                    body = script.read_text()
                except UnicodeDecodeError:
                    continue
                if str(building) in body:
                    script.write_text(body.replace(str(building), str(root)))
        (root / "pyvenv.cfg").write_text(
            (root / "pyvenv.cfg").read_text().replace(str(building), str(root))
        )
        stamp.write_text(wanted)
    return root / "bin"


def tokenizer_folder(python: Path, dest: Path) -> Path:
    """A local Hugging Face tokenizer folder (no hub): the toy tokenizer's words, word-level."""
    from specportal.workload import tokenizer as toy

    dest.mkdir(parents=True, exist_ok=True)
    words = sorted(set(toy._WORDS)) + list(toy._PUNCTUATION) + list(toy._LETTERS_DIGITS)
    words_file = dest.parent / f"{dest.name}-words.json"
    words_file.write_text(json.dumps(words))
    subprocess.run(
        [str(python), "-c", TOKENIZER_SCRIPT, str(dest), str(words_file)],
        check=True, capture_output=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    return dest


def hub_cache(tokenizer: Path, home: Path, repo: str = "specportal/toy-tokenizer") -> Path:
    """``tokenizer`` laid out as a Hugging Face hub cache entry (``HF_HOME=home``).

    AIPerf, offline, resolves a tokenizer name through the hub cache only (a folder path is taken
    for a repository id), so the local folder is also placed where the cache would keep it.
    """
    commit = "0" * 40
    entry = home / "hub" / f"models--{repo.replace('/', '--')}"
    snapshot = entry / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    (entry / "refs").mkdir(exist_ok=True)
    (entry / "refs" / "main").write_text(commit)
    for item in tokenizer.iterdir():
        shutil.copy(item, snapshot / item.name)
    return home


def sharegpt_file(path: Path, count: int = 64) -> Path:
    """A local ShareGPT-format file: SGLang's client loads one even for ``--dataset-name random``
    (and downloads it from a hub when none is given)."""
    from specportal.workload.synthetic import synthetic_prompts

    humans = synthetic_prompts([24 + i % 16 for i in range(count)], seed=1)
    answers = synthetic_prompts([16 + i % 8 for i in range(count)], seed=2)
    rows = [
        {"id": str(i), "conversations": [{"from": "human", "value": humans[i]},
                                         {"from": "gpt", "value": answers[i]}]}
        for i in range(count)
    ]  # fmt: skip
    path.write_text(json.dumps(rows))
    return path


@dataclass
class Emulator:
    proc: subprocess.Popen[bytes]
    url: str

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def start_emulator(flavor: str, args: Sequence[str], port: int, log: Path) -> Emulator:
    import socket

    command = [sys.executable, "-m", "specportal", "emulate", "--flavor", flavor, *args,
               "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    proc = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the emulator exited with {proc.returncode}: {log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return Emulator(proc, f"http://127.0.0.1:{port}")
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise TimeoutError("the emulator did not listen")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- SGLang's fixture ----------------------------------------------------------------------------


def sglang_fixture(out_dir: Path) -> Path:
    """Run SGLang 0.5.23's ``bench_serving`` against the emulated SGLang server, twice (the
    native ``/generate`` backend and the OpenAI completions one), appending to one file."""
    work = out_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    bin_dir = ensure_venv(SGLANG, log=work / "pip.log")
    tokenizer = tokenizer_folder(bin_dir / "python", work / "tokenizer")
    dataset = sharegpt_file(work / "sharegpt.json")
    result = out_dir / "sglang-0.5.23.bench_serving.jsonl"
    result.unlink(missing_ok=True)
    emulator = start_emulator("sglang", ["--model-path", "Qwen/Qwen3-8B", "--emu-step-ms", "20"],
                              free_port(), work / "emulator.log")  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(work / "hf")}
    try:
        for backend, extra in (("sglang", ["--max-concurrency", "4"]),
                               ("sglang-oai", ["--request-rate", "8"])):  # fmt: skip
            subprocess.run(
                [str(bin_dir / "python"), "-m", "sglang.bench_serving", "--backend", backend,
                 "--base-url", emulator.url, "--model", "Qwen/Qwen3-8B",
                 "--tokenizer", str(tokenizer), "--dataset-name", "random",
                 "--dataset-path", str(dataset), "--num-prompts", "24",
                 "--random-input-len", "48", "--random-output-len", "16",
                 "--random-range-ratio", "1.0", "--output-file", str(result),
                 "--output-details", "--disable-tqdm", "--tag", "sglang-0.5.23",
                 "--seed", "1", *extra],
                check=True, env=env, stdout=(work / f"{backend}.log").open("wb"),
                stderr=subprocess.STDOUT, timeout=600,
            )  # fmt: skip
    finally:
        emulator.stop()
    return result


def main(argv: Sequence[str]) -> int:
    if len(argv) == 2 and argv[0] == "sglang-fixture":
        print(sglang_fixture(Path(argv[1])))
        return 0
    print("usage: python -m tests.specportal.formats.peers sglang-fixture OUT_DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
