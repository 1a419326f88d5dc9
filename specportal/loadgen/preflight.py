"""Preflight: is the server usable, what is its model, does the generation path exist?

``GET /health``, ``GET /v1/models`` and a probe of the generation path that cannot generate
(a generation would warm one arm's prefix cache). Failures are one line (``PreflightError``).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import httpx

from specportal.loadgen.config import BenchConfig


class PreflightError(RuntimeError):
    """The server cannot be used (unreachable, unhealthy, or no model to name)."""


def auth_headers(config: BenchConfig) -> dict[str, str]:
    headers = dict(config.headers)
    key = os.environ.get("OPENAI_API_KEY")
    if key and not any(k.lower() == "authorization" for k in headers):
        headers["Authorization"] = f"Bearer {key}"
    return headers


def probe_endpoint(client: httpx.Client, url: str) -> dict[str, Any]:
    """Check that the generation endpoint exists without asking it to generate.

    A generation, even a one-token one, would warm the prefix cache of one arm. Instead:
    ``GET`` the path. FastAPI/Starlette servers (vLLM, SGLang) answer 405 for ``GET`` on a
    ``POST`` route and 404 for an unknown path, so 405 settles it. llama-server (cpp-httplib)
    answers 404 for ``GET`` on its ``POST`` routes too (measured on the pinned build), so after a
    404 the path gets a ``POST`` of ``[]``: a JSON array is no generation request on any engine
    (llama-server answers 400, FastAPI 400/422), while an unknown path still answers 404. Any
    other answer (401 without a key, a proxy's 200...) is inconclusive and lets the run start;
    the abort after the first identical failures stays as the second line of defence.
    """
    probe: dict[str, Any] = {"url": url, "get_status": None, "post_status": None}
    try:
        get = client.get(url)
    except httpx.HTTPError as exc:
        raise PreflightError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from None
    probe["get_status"] = get.status_code
    if get.status_code != 404:
        return probe
    try:
        post = client.post(url, content=b"[]", headers={"Content-Type": "application/json"})
    except httpx.HTTPError as exc:
        raise PreflightError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from None
    probe["post_status"] = post.status_code
    if post.status_code == 404:
        raise PreflightError(
            f"{url} does not exist on this server (HTTP 404 for GET and POST): "
            "wrong --endpoint or --backend?"
        )
    return probe


def preflight(config: BenchConfig, headers: dict[str, str]) -> dict[str, Any]:
    """``GET /health``, ``GET /v1/models``, then :func:`probe_endpoint` (never a generation);
    raises ``PreflightError`` with one line."""
    base = config.base_url.rstrip("/")
    info: dict[str, Any] = {}
    with httpx.Client(timeout=10.0, headers=headers) as client:
        try:
            health = client.get(base + "/health")
        except httpx.HTTPError as exc:
            raise PreflightError(f"cannot reach {base}: {type(exc).__name__}: {exc}") from None
        info["health_status"] = health.status_code
        if health.status_code >= 500:
            raise PreflightError(f"{base}/health answered HTTP {health.status_code}: not ready")
        try:
            models = client.get(base + "/v1/models")
        except httpx.HTTPError as exc:
            raise PreflightError(f"cannot reach {base}/v1/models: {exc}") from None
        info["models_status"] = models.status_code
        if models.status_code == 200:
            with contextlib.suppress(ValueError, KeyError, TypeError, IndexError):
                data = models.json()["data"]
                info["models"] = [m.get("id") for m in data]
                info["model_root"] = data[0].get("root")
        info["endpoint_probe"] = probe_endpoint(client, config.url)
    needs_model = config.endpoint_kind.startswith(("openai", "llamacpp-openai"))
    if config.request_model is None and needs_model and not info.get("models"):
        raise PreflightError(
            f"no --model given and {base}/v1/models lists none (HTTP {info['models_status']})"
        )
    return info
