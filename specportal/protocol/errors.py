"""``ProtocolError``: what is wrong with a protocol document, by dotted path into it."""

from __future__ import annotations

from typing import Final

# A malformed upload can be wrong in every one of its 100,000 records: the answer names the first
# few places and counts the rest, so the error stays small enough to read and to send.
MAX_LISTED_FIELDS: Final = 20


class ProtocolError(ValueError):
    """A document the protocol refuses; ``fields`` maps dotted paths to messages.

    Paths are dotted paths into the document (``workloads.0.endpoint_kind``,
    ``result.requests.12.index``); ``""`` is the document itself. The portal answers 400 with
    ``fields`` in its one error shape; the agent fails the run with ``str(error)``.
    """

    def __init__(self, fields: dict[str, list[str]], message: str | None = None) -> None:
        self.fields = fields
        if message is None:
            path, messages = next(iter(fields.items()), ("", ["invalid"]))
            message = f"{path or 'document'}: {messages[0]}" if messages else "invalid"
            if len(fields) > 1:
                message += f" (and {len(fields) - 1} more)"
        super().__init__(message)


def join(path: str, key: str | int) -> str:
    """``join("loads.0", "requests")`` → ``"loads.0.requests"``; ``join("", "run")`` → ``"run"``."""
    return f"{path}.{key}" if path else str(key)


class Problems:
    """Collects every problem of a document (the house rule: report them all at once), up to
    ``MAX_LISTED_FIELDS`` paths; the rest are counted, not listed."""

    __slots__ = ("fields", "unlisted")

    def __init__(self) -> None:
        self.fields: dict[str, list[str]] = {}
        self.unlisted = 0

    def add(self, path: str, message: str) -> None:
        messages = self.fields.get(path)
        if messages is not None:
            if message not in messages:
                messages.append(message)
        elif len(self.fields) < MAX_LISTED_FIELDS:
            self.fields[path] = [message]
        else:
            self.unlisted += 1

    def child(self) -> Problems:
        """Problems of one part, recorded here too: ``bool(child)`` says whether that part had
        any (a list's items are checked one by one)."""
        part = _Part(self)
        return part

    def __bool__(self) -> bool:
        return bool(self.fields)

    def raise_if_any(self, what: str | None = None) -> None:
        if not self.fields:
            return
        fields = dict(self.fields)
        if self.unlisted:
            fields.setdefault("", []).append(f"{self.unlisted} more problems not listed")
        message = None
        if what is not None:
            count = len(self.fields) + self.unlisted
            message = f"{what} is not valid: " + "; ".join(
                f"{path or 'document'}: {msgs[0]}" for path, msgs in list(self.fields.items())[:3]
            )
            if count > 3:
                message += f" (and {count - 3} more)"
        raise ProtocolError(fields, message)


class _Part(Problems):
    __slots__ = ("_count", "_parent")

    def __init__(self, parent: Problems) -> None:
        super().__init__()
        self._parent = parent
        self._count = 0

    def add(self, path: str, message: str) -> None:
        self._count += 1
        self._parent.add(path, message)

    def __bool__(self) -> bool:
        return self._count > 0
