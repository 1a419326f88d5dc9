"""A finished run's figure data, computed once when it lands (``RunFigures``).

Per-request samples come from ``specportal.metrics`` over the stored chunk times (the same
definitions as the run's summary); what is kept is the downsampled ECDF per metric
(``analysis.figures``: at most ~1,000 exact points) and the tokens-per-chunk counts.
"""

from __future__ import annotations

from django.db import transaction

from analysis.figures.bundle import RunSamples, run_figure_data, run_samples
from runs.models import Run, RunFigures
from runs.selectors import run_timings


def run_samples_read(*, run_id: int) -> RunSamples:
    return run_samples(run_timings(run_id=run_id))


@transaction.atomic
def run_figures_compute(*, run_id: int, samples: RunSamples | None = None) -> RunFigures | None:
    """(Re)compute a finished run's figure data; ``None`` for a run without measured results."""
    run = Run.objects.filter(pk=run_id).only("pk", "result_attempt").first()
    if run is None or run.result_attempt is None:
        RunFigures.objects.filter(run_id=run_id).delete()
        return None
    data = run_figure_data(samples if samples is not None else run_samples_read(run_id=run_id))
    figures, _ = RunFigures.objects.update_or_create(
        run_id=run_id, defaults={"result_attempt": run.result_attempt, "data": data}
    )
    return figures
