"""Verdicts as concluded, kept whole: a new computation supersedes the last, never edits it.

``Verdict`` is one computation for one experiment: the objectives' hash, the analysis version, the
runs it used and the full document (``analysis/VERDICT.md``). Its ``CandidateVerdict`` rows (per
candidate: overall and per-workload state) and ``CellVerdict`` rows (per candidate × cell) are
the same document's states, for queries and lists. The database refuses UPDATE of all three
(migration ``verdicts/0001_initial``): the history of what was concluded when is kept.
"""

from __future__ import annotations

from django.db import models

STATES = (("KEEP", "KEEP"), ("DROP", "DROP"), ("INCONCLUSIVE", "INCONCLUSIVE"))


class Verdict(models.Model):
    experiment = models.ForeignKey(
        "experiments.Experiment", on_delete=models.CASCADE, related_name="verdicts"
    )
    supersedes = models.OneToOneField(
        "self", on_delete=models.RESTRICT, null=True, blank=True, related_name="superseded_by"
    )
    computed_at = models.DateTimeField(auto_now_add=True)
    analysis_version = models.CharField(max_length=32)
    objectives_sha256 = models.CharField(max_length=64)
    # The runs the verdict stands on, with the attempt whose result it read: a re-queued run's
    # new attempt is a new input.
    inputs = models.JSONField()
    inputs_sha256 = models.CharField(max_length=64)
    document = models.JSONField()

    class Meta:
        ordering = ("experiment", "-id")
        indexes = (models.Index(fields=["experiment", "-id"], name="verdict_latest"),)

    def __str__(self) -> str:
        return f"verdict {self.pk} of experiment {self.experiment_id}"


class CandidateVerdict(models.Model):
    verdict = models.ForeignKey(Verdict, on_delete=models.CASCADE, related_name="candidates")
    arm = models.ForeignKey("experiments.Arm", on_delete=models.CASCADE, related_name="+")
    # NULL is the document's null, "no verdict" (no objective in scope), distinct from any state.
    state = models.CharField(max_length=16, choices=STATES, null=True, blank=True)  # noqa: DJ001
    workloads = models.JSONField()  # {"chat": "KEEP", "code": "DROP", ...}

    class Meta:
        constraints = (
            models.UniqueConstraint(fields=["verdict", "arm"], name="candidate_verdict_once"),
        )

    def __str__(self) -> str:
        return f"{self.arm_id}: {self.state}"


class CellVerdict(models.Model):
    verdict = models.ForeignKey(Verdict, on_delete=models.CASCADE, related_name="cells")
    arm = models.ForeignKey("experiments.Arm", on_delete=models.CASCADE, related_name="+")
    workload = models.CharField(max_length=100)
    load = models.CharField(max_length=100)
    state = models.CharField(max_length=16, choices=STATES, null=True, blank=True)  # noqa: DJ001
    runs_needed = models.PositiveIntegerField(null=True, blank=True)
    runs_needed_at_least = models.PositiveIntegerField(null=True, blank=True)
    document = models.JSONField()  # the cell's candidate entry of the verdict document

    class Meta:
        constraints = (
            models.UniqueConstraint(
                fields=["verdict", "arm", "workload", "load"], name="cell_verdict_once"
            ),
        )

    def __str__(self) -> str:
        return f"{self.workload}/{self.load} {self.arm_id}: {self.state}"


class VerdictRequest(models.Model):
    """How many times an experiment's verdict was asked for (one per run that ended or was
    re-queued). A recomputation task carries the count it was published with: while runs keep
    landing, a task overtaken by a newer request skips (the newer one computes on more runs),
    so the worker computes once per burst instead of once per run."""

    experiment = models.OneToOneField(
        "experiments.Experiment", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    requested = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"verdict of experiment {self.experiment_id} requested {self.requested} times"
