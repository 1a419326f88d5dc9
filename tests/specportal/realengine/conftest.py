"""Fixtures for tests against the real llama-server (marker ``real_engine``).

The binary comes from the stamped cache that ``scripts/test`` fills before pytest starts (a cold
build takes ≈6 minutes, longer than a test's timeout); the models are written per session in about a
second. Servers run one at a time with ``-t 1``, so a test never competes with another engine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specportal.realengine import build, gguf_models


@pytest.fixture(scope="session")
def llama_server() -> Path:
    binary = build.find_binary()
    if binary is None:
        pytest.fail(
            f"llama-server is not built for stamp {build.version_stamp()}: run "
            "'make real-engine' (the README's test command, scripts/test, builds it first)"
        )
    return binary


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gguf")
    gguf_models.write_model_set(out, seed=0)
    return out
