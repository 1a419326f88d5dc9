"""Django's development server without a 40 ms stall in every response.

Django's request handler writes a response's status line and headers, then its body, as separate
small sends on an unbuffered socket. With Nagle's algorithm on, the body waits until the client
acknowledges the headers, and the client delays that acknowledgement (up to 40 ms on Linux): every
response of ``runserver`` and of the test suite's live server took over 40 ms however little it
did. Measured on loopback, 50 requests each: 43 ms per GET and 44 ms per POST with Django's server,
1.1 ms with ``TCP_NODELAY`` on the accepted sockets. Agents' heartbeats and uploads, the demo's
pages and the fuzzer all waited on it. (Production serves through gunicorn, not this server.)

This app only provides ``runserver`` (listed before ``django.contrib.staticfiles`` so its command
wins, serving static files the same way); the suite's live server uses ``NoDelayWSGIServer``
directly (``tests/conftest.py``).
"""

from __future__ import annotations

import socket
from typing import Any

from django.core.servers.basehttp import ThreadedWSGIServer, WSGIServer

__all__ = ["NoDelayThreadedWSGIServer", "NoDelayWSGIServer"]


class NoDelayWSGIServer(WSGIServer):
    """Django's ``WSGIServer`` whose accepted connections send small writes at once."""

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address


class NoDelayThreadedWSGIServer(NoDelayWSGIServer, ThreadedWSGIServer):
    """The threaded server Django's ``LiveServerThread`` runs, with ``TCP_NODELAY``."""
