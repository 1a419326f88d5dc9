"""Experiments and their arms (DESIGN §3); the runs they plan live in ``runs``."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Experiment(models.Model):
    """Arms over one target, a workload × load matrix, repetitions and objectives fixed at start.

    From ``locked_at`` on, the objectives, their hash and the arms never change (the database
    refuses it too: the lock guard of migration ``experiments/0001_initial``).
    """

    class Status(models.TextChoices):
        DRAFT = "draft"
        RUNNING = "running"
        DONE = "done"
        STOPPED = "stopped"  # the failure policy stopped it
        CANCELLED = "cancelled"

    class CachePolicy(models.TextChoices):
        FRESH_SERVER = "fresh_server"  # a new engine process per run
        RESET_CACHE = "reset_cache"  # the engine's cache-reset endpoint before each run
        WARM = "warm"  # explicitly warm for both arms

    class FailurePolicy(models.TextChoices):
        CONTINUE = "continue"
        STOP = "stop"

    class Mode(models.TextChoices):
        MEASURED = "measured"  # agents on the experiment's hosts measure every run
        IMPORT = "import"  # its cells are filled by uploads of other tools' result files

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    # Ordered lists of {"name": ..., ...}: JSON objects lose key order in jsonb.
    workloads = models.JSONField()
    loads = models.JSONField()
    repetitions = models.PositiveIntegerField(default=3)
    warmup_requests = models.PositiveIntegerField(default=0)
    # Per cell and standalone-draft candidate, one more run serving the draft model alone as the
    # target (runs.Run.draft_alone_configuration): the verdict's speculation model then uses the
    # measured draft cost c instead of the one implied from the speed-up.
    calibrate_draft_cost = models.BooleanField(default=False)
    cache_policy = models.CharField(
        max_length=16, choices=CachePolicy.choices, default=CachePolicy.FRESH_SERVER
    )
    failure_policy = models.CharField(
        max_length=16, choices=FailurePolicy.choices, default=FailurePolicy.CONTINUE
    )
    max_failed_runs = models.PositiveIntegerField(default=0)
    objectives = models.JSONField()
    objectives_hash = models.CharField(max_length=64, blank=True)
    locked_at = models.DateTimeField(null=True, blank=True)
    # Arms that differ beyond the proposal are refused unless a reason is recorded here.
    arms_difference_reason = models.TextField(blank=True)
    arms_differences = models.JSONField(default=list, blank=True)
    lint_override_reason = models.TextField(blank=True)
    lint_findings = models.JSONField(default=list, blank=True)
    hosts = models.ManyToManyField("hosts.GpuHost", related_name="experiments")
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.MEASURED)
    # Where a CI job's experiment comes from: repository, commit, branch, pull_request, job_url.
    context = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")
        constraints = (
            models.CheckConstraint(
                condition=models.Q(repetitions__gte=1), name="experiment_repetitions_positive"
            ),
            models.CheckConstraint(
                condition=models.Q(locked_at__isnull=True) | ~models.Q(objectives_hash=""),
                name="experiment_locked_has_hash",
            ),
        )

    def __str__(self) -> str:
        return self.name


class Arm(models.Model):
    """One frozen configuration in an experiment; position 0 is the baseline."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="arms")
    position = models.PositiveIntegerField()
    label = models.CharField(max_length=64)
    configuration = models.ForeignKey(
        "configurations.FrozenConfiguration", on_delete=models.PROTECT, related_name="arms"
    )

    class Meta:
        ordering = ("experiment", "position")
        constraints = (
            models.UniqueConstraint(fields=["experiment", "position"], name="arm_position_unique"),
            models.UniqueConstraint(fields=["experiment", "label"], name="arm_label_unique"),
        )

    def __str__(self) -> str:
        return self.label

    @property
    def is_baseline(self) -> bool:
        return self.position == 0


class ExperimentFigures(models.Model):
    """One section of an experiment page's figures, precomputed (``experiments.figures``).

    ``section`` is ``workload:<name>`` (load curves, Pareto, predicted vs measured) or
    ``cell:<workload>/<load>`` (ECDFs, tokens per chunk, acceptance, the tail table). ``version``
    is a digest of the inputs (finished runs with their attempts, the verdict), so a new run or a
    new verdict makes a new version and the page redraws only the sections whose version moved.
    ``figures_gzip`` is the figure JSON already serialised and gzip'd: the page's figure request
    sends these bytes as they are.
    """

    experiment = models.ForeignKey(
        Experiment, on_delete=models.CASCADE, related_name="figure_sections"
    )
    section = models.CharField(max_length=250)
    position = models.PositiveIntegerField(default=0)  # order on the page
    version = models.CharField(max_length=64)
    figures_gzip = models.BinaryField()
    rows = models.JSONField(default=dict)  # the table behind each figure (CSV downloads)
    tail = models.JSONField(default=list)  # a cell's tail table, drawn as HTML
    # A cell's pooled ECDF curves and tokens-per-chunk counts per arm, for comparisons.
    curves = models.JSONField(default=dict)
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("experiment", "position")
        constraints = (
            models.UniqueConstraint(
                fields=["experiment", "section"], name="experiment_figures_section_unique"
            ),
        )

    def __str__(self) -> str:
        return f"{self.section} of experiment {self.experiment_id}"

    @property
    def kind(self) -> str:
        return self.section.partition(":")[0]

    @property
    def name(self) -> str:
        return self.section.partition(":")[2]
