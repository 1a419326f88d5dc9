"""The embedded broker: kombu's filesystem transport, with messages that appear whole.

The demo and a quick install need no broker service: the portal, its worker and the agents share
a folder (``broker_dir``) through kombu's filesystem transport. Stock kombu writes a message by
opening ``<name>.msg`` and then writing into it under an advisory lock, while a consumer lists the
folder, *moves* the file (a rename ignores the lock) and reads it; a consumer that lists the
folder between the open and the write reads an empty file and dies in ``json.loads`` (seen in a
demo under load: "Unrecoverable error: JSONDecodeError"). Here a message is written under a
name no consumer picks up and renamed into place: a rename within a folder is atomic, so a
consumer sees either nothing or the whole message.

Django-free: the portal's settings and ``specportal agent`` both take their broker from here.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from time import monotonic
from typing import Any, Final

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.json import dumps

URL: Final = "filesystem://"
# What Celery's ``broker_transport`` names: this module's transport instead of kombu's own.
TRANSPORT: Final = f"{__name__}:Transport"
# A message being written ends in this suffix; consumers only take names ending in ``.msg``.
_PARTIAL_SUFFIX: Final = ".part"


class Channel(filesystem.Channel):
    # kombu names the second parameter ``message`` in its base class and ``payload`` in the
    # filesystem channel; this keeps the filesystem channel's signature.
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Put ``payload`` onto ``queue``: written aside, then renamed into place."""
        # kombu's own name: consumers sort by it (oldest first) and match the queue after the
        # first dot.
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + _PARTIAL_SUFFIX
        try:
            with open(partial, "wb") as handle:
                # kombu's own encoder (it knows the types kombu puts in a message).
                handle.write(dumps(payload).encode())  # type: ignore[no-untyped-call]
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel


def transport_options(broker_dir: Path) -> dict[str, Any]:
    """The folders every party (portal, worker, beat, agents) must share, under ``broker_dir``.

    kombu's default control folder is ``./control``: the exchange tables would land in whatever
    directory a process starts in, so it is named here too.
    """
    queue = broker_dir / "queue"
    queue.mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(queue),
        "data_folder_out": str(queue),
        "processed_folder": str(broker_dir / "processed"),
        "control_folder": str(broker_dir / "control"),
        "store_processed": False,
    }
