"""Credentials in URLs, masked wherever the portal shows or logs them.

``DATABASE_URL`` and ``CELERY_BROKER_URL`` carry passwords (``postgres://app:s3cret@db/sp``). Django
hides settings by *name* (``PASSWORD``, ``SECRET``...), and neither name matches; the development
server also copies the whole environment into every request's ``META``. This module masks by
*value* instead: any ``scheme://user:password@`` keeps its user and loses its password. It imports
nothing from Django, so the logging configuration can use it before the apps load.
"""

from __future__ import annotations

import logging
import re
from typing import Final

MASK: Final = "********"
# scheme://[user]:password@ — the password is anything up to the '@' that ends the authority
# (no '/', whitespace or quote: the URL ends there in a repr, a log line or an HTML page).
_CREDENTIALS: Final = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/@:'\"<>]*:)(?P<password>[^\s/@'\"<>]+)@"
)


def mask_credentials(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``MASK``."""
    if "://" not in text:
        return text
    return _CREDENTIALS.sub(lambda m: f"{m['head']}{MASK}@", text)


class MaskCredentialsFilter(logging.Filter):
    """A logging filter (on every handler of ``LOGGING``): the record's message and traceback
    with URL passwords masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_credentials(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_credentials(record.exc_text)
        return True
