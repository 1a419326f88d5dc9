"""A small REST client of the portal for the command line (Django-free; httpx).

The token comes from ``SPECPORTAL_TOKEN`` only (never a flag: flags end up in CI logs). A write
carries one ``Idempotency-Key`` for all of its attempts, so a retry after a dropped connection or a
502/503/504 answers the first result instead of creating a second experiment. A 429 (the portal
throttles an address after wrong tokens: a shared CI runner can be throttled for another job's
mistake) is waited out as its ``Retry-After`` says, up to ``MAX_THROTTLE_WAIT`` seconds.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping
from typing import Any

import httpx

RETRY_STATUSES = frozenset({502, 503, 504})
# The longest Retry-After worth waiting for in a CI job; a longer one is reported as the 429 it is.
MAX_THROTTLE_WAIT = 330.0


class PortalError(Exception):
    """The portal answered with an error: ``status``, its message and field paths."""

    def __init__(
        self,
        status: int,
        message: str,
        fields: Mapping[str, list[str]] | None = None,
        code: str = "",
    ):
        self.status = status
        self.code = code
        self.fields = dict(fields or {})
        detail = "; ".join(f"{k}: {' '.join(v)}" for k, v in self.fields.items())
        super().__init__(f"{message} ({detail})" if detail else message)


class PortalUnreachable(Exception):
    """No answer after every retry."""


def token_from_environment() -> str:
    token = os.environ.get("SPECPORTAL_TOKEN", "").strip()
    if not token:
        raise PortalError(0, "set SPECPORTAL_TOKEN to an API token (it is never taken as a flag)")
    return token


class Portal:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 30.0,
        attempts: int = 6,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.attempts = attempts
        self.backoff = backoff
        self.client = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Token {token}", "User-Agent": "specportal-cli"},
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self.client.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        files: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        key: str | None = None,
    ) -> Any:
        """The JSON answer; a write gets one Idempotency-Key (``key`` or a fresh one) for every
        attempt. ``PortalError`` for a 4xx, ``PortalUnreachable`` after the last attempt."""
        send_headers = dict(headers or {})
        if method != "GET":
            send_headers["Idempotency-Key"] = key or str(uuid.uuid4())
        last = ""
        for attempt in range(1, self.attempts + 1):
            try:
                response = self.client.request(method, path, json=json, content=content,
                                               files=files, params=params, headers=send_headers)  # fmt: skip
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                wait = _throttled_for(response)
                if wait is not None and attempt < self.attempts:
                    time.sleep(wait)
                    continue
                if response.status_code not in RETRY_STATUSES:
                    return _answer(response)
                last = f"HTTP {response.status_code}"
            if attempt < self.attempts:
                time.sleep(min(self.backoff * 2 ** (attempt - 1), 10.0))
        raise PortalUnreachable(f"{self.url} unreachable after {self.attempts} attempts ({last})")


def _throttled_for(response: httpx.Response) -> float | None:
    """Seconds to wait before asking again, for a 429 whose Retry-After is worth waiting for."""
    if response.status_code != 429:
        return None
    try:
        seconds = float(response.headers.get("Retry-After", ""))
    except ValueError:
        return None
    return seconds if 0 <= seconds <= MAX_THROTTLE_WAIT else None


def _answer(response: httpx.Response) -> Any:
    if response.status_code == 204:
        return None
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code >= 400:
        error = body.get("error", {}) if isinstance(body, dict) else {}
        message = error.get("message") or (body and body.get("detail")) or response.reason_phrase
        raise PortalError(response.status_code, f"HTTP {response.status_code}: {message}",
                          error.get("fields"), str(error.get("code") or ""))  # fmt: skip
    return body
