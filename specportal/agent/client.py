"""The agent's side of the portal's REST surface (``/api/v1/agent/...``, host token)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import httpx

from specportal.protocol import Progress, ResultEnvelope

# Portal calls are small; a slow portal must not hang a run forever, but an upload of a large
# result file over a slow link may take a while.
REQUEST_TIMEOUT_SECONDS: Final = 30.0
UPLOAD_TIMEOUT_SECONDS: Final = 600.0
# An upload is sent in pieces this large, each one progress for the agent's stall watchdog.
UPLOAD_CHUNK_BYTES: Final = 256 * 1024


# A throttled answer's Retry-After is honoured up to this long (the portal's token-failure window
# is 300 s by default; accounts.throttling).
RETRY_AFTER_MAX_SECONDS: Final = 330.0


class PortalError(Exception):
    """The portal answered with an error (4xx/5xx) or could not be reached."""

    def __init__(
        self, message: str, status_code: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        # 429: the seconds the portal asked to wait (bounded); the request may be sent again then.
        self.retry_after = retry_after

    @property
    def final(self) -> bool:
        """A refusal that sending the same request again cannot change (a 4xx other than 429)."""
        code = self.status_code
        return code is not None and 400 <= code < 500 and code != 429


class ClaimConflict(PortalError):
    """409: another attempt holds the run, or it is no longer claimable."""


class PortalClient:
    """Thin JSON client; every method returns the decoded JSON body."""

    def __init__(
        self, base_url: str, token: str, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url.rstrip("/") + "/api/v1/agent/",
            headers={"Authorization": f"Host {token}"},
            timeout=REQUEST_TIMEOUT_SECONDS,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise PortalError(f"{method} {path}: {exc}") from exc
        if response.status_code == 409:
            raise ClaimConflict(_message(response), 409)
        if response.status_code >= 400:
            raise PortalError(
                f"{method} {path}: {_message(response)}",
                response.status_code,
                _retry_after(response) if response.status_code == 429 else None,
            )
        body = response.json()
        if not isinstance(body, dict):
            raise PortalError(f"{method} {path}: expected a JSON object")
        return body

    def run(self, run_id: int) -> dict[str, Any]:
        """The run's specification and its cancel flag."""
        return self._call("GET", f"runs/{run_id}")

    def claim(self, run_id: int, attempt: int) -> dict[str, Any]:
        """Take the run's lease for this attempt; ``ClaimConflict`` when another attempt has it."""
        return self._call("POST", f"runs/{run_id}/claim", json={"attempt": attempt})

    def heartbeat(
        self,
        *,
        inventory: Mapping[str, Any],
        current_run: Mapping[str, int] | None,
    ) -> dict[str, Any]:
        """Report the host and renew the current run's lease; the answer carries its cancel flag."""
        return self._call(
            "POST",
            "heartbeat",
            json={"inventory": dict(inventory), "current_run": current_run},
        )

    def progress(self, run_id: int, progress: Progress) -> dict[str, Any]:
        return self._call("POST", f"runs/{run_id}/progress", json=progress.to_dict())

    def upload_result(
        self,
        run_id: int,
        attempt: int,
        envelope: ResultEnvelope,
        *,
        sent: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """PUT the gzip'd result envelope; the portal keeps the first upload of an attempt.

        ``sent(bytes so far, total)`` is called as each piece goes out (the stall watchdog's
        progress: a large upload over a slow link is not a stuck run). The length is declared, so
        the body is not chunk-encoded."""
        text = json.dumps(envelope.to_dict(), separators=(",", ":"))
        body = gzip.compress(text.encode(), compresslevel=5)
        return self._call(
            "PUT",
            f"runs/{run_id}/result",
            params={"attempt": attempt},
            content=_pieces(body, sent) if sent is not None else body,
            headers={
                "Content-Type": "application/json",
                "Content-Encoding": "gzip",
                "Content-Length": str(len(body)),
            },
            timeout=UPLOAD_TIMEOUT_SECONDS,
        )


def _pieces(body: bytes, sent: Callable[[int, int], None]) -> Iterator[bytes]:
    for start in range(0, len(body), UPLOAD_CHUNK_BYTES):
        piece = body[start : start + UPLOAD_CHUNK_BYTES]
        yield piece
        sent(start + len(piece), len(body))


def _retry_after(response: httpx.Response) -> float:
    """Seconds from a 429's ``Retry-After`` (a number; otherwise a short default), bounded."""
    try:
        seconds = float(response.headers.get("Retry-After", ""))
    except ValueError:
        seconds = 5.0
    return min(max(seconds, 0.0), RETRY_AFTER_MAX_SECONDS)


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
        return str(body["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}: {response.text[:200]}"
