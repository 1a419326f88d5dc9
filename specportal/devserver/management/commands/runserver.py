"""``runserver`` as staticfiles serves it, on a server that sets ``TCP_NODELAY`` (see the app)."""

from __future__ import annotations

from django.contrib.staticfiles.management.commands import runserver

from specportal.devserver import NoDelayWSGIServer


class Command(runserver.Command):
    server_cls = NoDelayWSGIServer
