"""A portal that throttles the agent's address (429 + Retry-After, accounts.throttling) delays the
result upload; it does not lose it (a 429 is not a final refusal like other 4xx)."""

from __future__ import annotations

import gzip
import time
from pathlib import Path

import httpx

from specportal.agent.client import RETRY_AFTER_MAX_SECONDS, PortalClient, PortalError
from specportal.agent.executor import AgentSettings, Executor, Heartbeat
from specportal.protocol import ResultEnvelope


def _client(answers: list[httpx.Response], seen: list[httpx.Request]) -> PortalClient:
    def handle(request: httpx.Request) -> httpx.Response:
        request.read()
        seen.append(request)
        return answers.pop(0)

    return PortalClient("http://portal.test", "t", transport=httpx.MockTransport(handle))


def _throttled(seconds: str) -> httpx.Response:
    body = {
        "error": {"code": "throttled", "message": "Too many failed host token ...", "fields": {}}
    }
    return httpx.Response(429, json=body, headers={"Retry-After": seconds})


def test_a_429_carries_its_retry_after_and_is_not_final() -> None:
    seen: list[httpx.Request] = []
    client = _client([_throttled("7"), _throttled("86400"), httpx.Response(401, json={})], seen)
    errors = []
    for _ in range(3):
        try:
            client.heartbeat(inventory={}, current_run=None)
        except PortalError as exc:
            errors.append(exc)
    assert [(e.status_code, e.retry_after, e.final) for e in errors] == [
        (429, 7.0, False),
        (429, RETRY_AFTER_MAX_SECONDS, False),
        (401, None, True),
    ]


def test_the_result_upload_waits_out_a_429_and_is_sent_again(tmp_path: Path) -> None:
    seen: list[httpx.Request] = []
    client = _client([_throttled("1"), httpx.Response(200, json={"stored": True})], seen)
    settings = AgentSettings(host="gpu-a", portal_url="http://portal.test", token="t",
                             work_dir=tmp_path, detect_engines=False)  # fmt: skip
    executor = Executor(settings, client, Heartbeat(client, settings))
    started = time.monotonic()
    assert executor._upload(7, 1, ResultEnvelope(7, 1, "failed", "the engine did not start"))
    assert time.monotonic() - started >= 1.0
    puts = [r for r in seen if r.method == "PUT"]
    assert len(puts) == 2
    # The same result, whole, the second time (gzip stamps its own time: compare what it holds).
    assert gzip.decompress(puts[0].content) == gzip.decompress(puts[1].content)
