"""The webhook signature, Django-free so a receiver can copy it: HMAC-SHA256 over the raw body.

Header ``X-SpecPortal-Signature: sha256=<hex>``. A receiver recomputes it over the bytes it got
(before any JSON parsing) with the secret it was shown once, and compares in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

HEADER = "X-SpecPortal-Signature"


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def signature(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(body: bytes, secret: str, header: str) -> bool:
    return hmac.compare_digest(signature(body, secret), header)
