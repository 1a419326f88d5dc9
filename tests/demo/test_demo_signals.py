"""``manage.py demo`` stops what it started on SIGTERM and SIGHUP, as on Ctrl-C."""

from __future__ import annotations

import os
import signal

import pytest


def test_sigterm_and_sighup_interrupt_the_demo_as_ctrl_c_does() -> None:
    from demo.management.commands.demo import stop_on_termination

    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        stop_on_termination()
        for signum in previous:
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signum)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
