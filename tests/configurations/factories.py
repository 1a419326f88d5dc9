"""Documents shared by the runs tests."""

from __future__ import annotations

import copy
from typing import Any

VLLM_EAGLE3: dict[str, Any] = {
    "schema": 1,
    "engine": "vllm",
    "engine_build": {"version": "0.30.0"},
    "target": {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "revision": "0e9e39f249a16976918f6564b8830bc894c89659",
        "tensor_parallel_size": 1,
        "max_num_seqs": 512,
    },
    "proposal": {
        "method": "eagle3",
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "revision": "9a4bc3e1b4c1a5e6b1b3a0c2f0e4d5c6b7a8e9f0",
        "num_speculative_tokens": 5,
        "num_speculative_tokens_per_batch_size": [
            [1, 16, 5],
            [17, 32, 4],
            [33, 64, 3],
            [65, 128, 1],
            [129, 512, 0],
        ],
    },
    "runtime": {"env": {"VLLM_USE_V2_MODEL_RUNNER": "0"}},
    "sampling": {"temperature": 0, "top_p": 1, "seed": 0},
}


def document(**changes: Any) -> dict[str, Any]:
    """A copy of the eagle3 example with dotted-path changes (``proposal__model="x"``)."""
    doc = copy.deepcopy(VLLM_EAGLE3)
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = doc
        for part in parents:
            node = node[part]
        node[last] = value
    return doc
