"""``Idempotency-Key`` on writes: the same key and body answer the first result again.

A client (``specportal ci`` retrying after a dropped connection) sends ``Idempotency-Key: <any
string up to 255 characters>`` with a POST/PUT/PATCH/DELETE. The first request with that key runs;
its answer (status and JSON body, for any status below 500) is stored with a SHA-256 of the method,
path and body. A later request from the same user with the same key and the same request gets that
stored answer again (header ``Idempotent-Replayed: true``) and changes nothing; the same key with
another request is refused with 409. Concurrent requests with one key are serialised (a row lock
on the key's placeholder), so two retries racing each other still create one thing.

Use: decorate an ``APIView`` write method with ``@idempotent`` (under its ``@extend_schema``; the
header is then documented). Writes whose answer carries a secret shown once (host tokens, webhook
secrets) are left undecorated: replaying them would mean keeping the secret in clear.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from specportal.api.errors import ApplicationError
from specportal.api.parsers import MalformedJSON, strict_loads

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
MAX_KEY = 255

Handler = Callable[..., Response]

PARAMETER = OpenApiParameter(
    HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="Any unique string (≤ 255 characters). Sending the same key with the same "
    "request again answers the first result (header Idempotent-Replayed: true) and creates "
    "nothing; the same key with another request is refused with 409.",
)


def _fingerprint(request: Request) -> str:
    raw = request._request.body if hasattr(request, "_request") else b""
    digest = hashlib.sha256()
    digest.update(request.method.encode() if request.method else b"")
    digest.update(b"\0" + request.path.encode() + b"\0")
    if raw:
        # The same JSON document written differently is the same body. Read with the parser's
        # limits (a body nested past the recursion limit was a 500 here, before the view); a
        # body it refuses is fingerprinted as it came, and the view's parser answers the 400.
        with contextlib.suppress(MalformedJSON, UnicodeDecodeError):
            document = strict_loads(raw.decode("utf-8"))
            raw = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    digest.update(raw)
    return digest.hexdigest()


def idempotent(handler: Handler) -> Handler:
    @functools.wraps(handler)
    def wrapper(view: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        from specportal.api.models import IdempotencyKey

        key = request.headers.get(HEADER)
        if key is None or not request.user.is_authenticated:
            return handler(view, request, *args, **kwargs)
        if not key or len(key) > MAX_KEY or not key.isprintable():
            raise ApplicationError(
                "The Idempotency-Key header is not valid.",
                fields={HEADER: [f"1 to {MAX_KEY} printable characters"]},
            )
        fingerprint = _fingerprint(request)
        with transaction.atomic():
            try:
                with transaction.atomic():
                    record = IdempotencyKey.objects.create(
                        user=request.user, key=key, method=request.method or "",
                        path=request.path, body_sha256=fingerprint, status_code=0,
                    )  # fmt: skip
                created = True
            except IntegrityError:
                created = False
            record = IdempotencyKey.objects.select_for_update().get(user=request.user, key=key)
            if not created:
                if record.body_sha256 != fingerprint:
                    raise ApplicationError(
                        "This Idempotency-Key was used for another request.",
                        code="idempotency_key_reused",
                        fields={HEADER: [f"first used for {record.method} {record.path} with "
                                         "another body; use a new key for a new request"]},
                        status_code=409,
                    )  # fmt: skip
                if record.status_code:
                    response = Response(record.response, status=record.status_code)
                    response[REPLAYED] = "true"
                    return response
            response = handler(view, request, *args, **kwargs)
            if response.status_code < 500:
                record.status_code = response.status_code
                record.response = response.data
                record.save(update_fields=["status_code", "response"])
            return response

    documented: Handler = extend_schema(parameters=[PARAMETER])(wrapper)
    return documented
