"""Signals of the run lifecycle, for apps that keep something derived from runs (``verdicts``).

``runs`` sends them and knows nothing of the receivers, so no app that reads runs is imported
by ``runs``: ``run_ended(sender, experiment_id, run_id)`` when a run reaches a final state (its
result ingested, failed, cancelled), ``run_requeued(sender, experiment_id, run_id)`` when a run
gets a new attempt (what the previous attempt measured no longer stands).
"""

from __future__ import annotations

from django.dispatch import Signal

run_ended = Signal()
run_requeued = Signal()
