from __future__ import annotations

from tests.specportal.emulator.harness import start_emulator

__all__ = ["start_emulator"]
