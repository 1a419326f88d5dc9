"""Bearer secrets for machines: user API tokens and GPU hosts' agent tokens (one implementation).

A token is ``<kind>_<public id>_<secret>``: the kind says what it is for (``spt`` a user's API
token, ``sph`` a host's agent token), the public id (8 random characters, independent of the
secret) lets a person recognise a token on a page or in the audit trail, and the secret is 32
random bytes. Only the SHA-256 of the whole token is stored. The *prefix* shown to viewers,
``<kind>_<public id>``, reveals nothing of the secret (the previous format showed the secret's
first 8 characters to every viewer of a host).

One unsalted SHA-256 suffices for 256-bit random secrets: a salt and a slow hash defend low-entropy
passwords against dictionary attacks, which do not apply here, and a plain digest lets a request
find its token with one indexed lookup. Tokens issued before this format (DRF's 40-hex keys,
``sph_<secret>`` host tokens) hash the same way, so they keep working after their migration.
"""

from __future__ import annotations

import hashlib
import secrets
import string
from dataclasses import dataclass
from typing import Final

USER_TOKEN_KIND: Final = "spt"
HOST_TOKEN_KIND: Final = "sph"

# Lower-case letters and digits: readable aloud, no separator characters.
_PUBLIC_ID_ALPHABET: Final = string.ascii_lowercase + string.digits
PUBLIC_ID_LENGTH: Final = 8
SECRET_BYTES: Final = 32
# <kind>_<public id>: 3 + 1 + 8 characters.
PREFIX_LENGTH: Final = 12


@dataclass(frozen=True)
class IssuedToken:
    """A freshly generated token: ``secret`` is shown once and never stored."""

    secret: str
    prefix: str
    hash: str

    def __repr__(self) -> str:  # never print the secret in a traceback or a log
        return f"IssuedToken(prefix={self.prefix!r})"


def token_hash(token: str) -> str:
    """The stored form of a token (hex SHA-256 of its UTF-8 bytes)."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_generate(*, kind: str) -> IssuedToken:
    public_id = "".join(secrets.choice(_PUBLIC_ID_ALPHABET) for _ in range(PUBLIC_ID_LENGTH))
    prefix = f"{kind}_{public_id}"
    secret = f"{prefix}_{secrets.token_urlsafe(SECRET_BYTES)}"
    return IssuedToken(secret=secret, prefix=prefix, hash=token_hash(secret))
