"""The hash chain of audit events: what is hashed, and how a chain is checked.

An event's hash is SHA-256 over the RFC 8785 canonical JSON of its whole content, the previous
event's hash included (:func:`event_payload`), so changing any field of any event, removing one,
or inserting one breaks a link that :func:`verify_chain` names. The first event's ``prev_hash`` is
:data:`GENESIS_HASH`. Django-free on purpose: an exported chain (JSON lines) is checked by the
same code as the table.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import rfc8785

GENESIS_HASH = "0" * 64
PAYLOAD_KEYS = (
    "seq",
    "occurred_at",
    "actor_kind",
    "actor_user_id",
    "actor_name",
    "actor_token",
    "action",
    "object_type",
    "object_id",
    "object_repr",
    "before",
    "after",
    "request_id",
    "source_address",
    "prev_hash",
)


def event_hash(payload: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of exactly :data:`PAYLOAD_KEYS`."""
    document = {key: payload[key] for key in PAYLOAD_KEYS}
    return hashlib.sha256(rfc8785.dumps(document)).hexdigest()


@dataclass(frozen=True)
class ChainReport:
    count: int
    head_seq: int
    head_hash: str
    broken: str | None  # the first broken link, in words; None when intact

    @property
    def intact(self) -> bool:
        return self.broken is None


def verify_chain(
    events: Iterable[Mapping[str, Any]], *, expected_head: tuple[int, str] | None = None
) -> ChainReport:
    """Walk events in ``seq`` order; report the first broken link.

    ``expected_head`` (a head read from the log) must be in the chain with that hash: a chain
    that ends before it lost its newest events.
    """
    previous_hash = GENESIS_HASH
    previous_seq = 0
    count = 0
    seen_expected = False
    for event in events:
        seq = int(event["seq"])
        count += 1
        if seq != previous_seq + 1:
            missing = (
                f"event #{previous_seq + 1}"
                if seq == previous_seq + 2
                else f"events #{previous_seq + 1}–#{seq - 1}"
            )
            return ChainReport(
                count,
                previous_seq,
                previous_hash,
                f"broken link before event #{seq}: {missing} missing (deleted)"
                if seq > previous_seq
                else f"broken link at event #{seq}: out of order after #{previous_seq}",
            )
        if event["prev_hash"] != previous_hash:
            return ChainReport(
                count,
                previous_seq,
                previous_hash,
                f"broken link at event #{seq}: its previous hash {str(event['prev_hash'])[:12]}… "
                f"is not event #{previous_seq}'s hash {previous_hash[:12]}… "
                "(an earlier event was altered or replaced)",
            )
        recomputed = event_hash(event)
        if recomputed != event["hash"]:
            return ChainReport(
                count,
                previous_seq,
                previous_hash,
                f"broken link at event #{seq}: its content does not match its hash "
                f"(stored {str(event['hash'])[:12]}…, content hashes to {recomputed[:12]}…): "
                "the event was altered",
            )
        if expected_head is not None and seq == expected_head[0]:
            if event["hash"] != expected_head[1]:
                return ChainReport(
                    count,
                    seq,
                    str(event["hash"]),
                    f"broken link at event #{seq}: the log's head hash "
                    f"{expected_head[1][:12]}… differs from the database's "
                    f"{str(event['hash'])[:12]}… (the chain was rewritten from here)",
                )
            seen_expected = True
        previous_hash = str(event["hash"])
        previous_seq = seq
    if expected_head is not None and not seen_expected:
        return ChainReport(
            count,
            previous_seq,
            previous_hash,
            f"broken link after event #{previous_seq}: the log's head is event "
            f"#{expected_head[0]} ({expected_head[1][:12]}…), which the database does not hold "
            "(the newest events were deleted)",
        )
    return ChainReport(count, previous_seq, previous_hash, None)
