"""The run lifecycle's records (DESIGN §3, §5): runs, their per-request records, result uploads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from django.db import models

from runs.fields import FloatArrayField, IntegerArrayField

if TYPE_CHECKING:
    from hosts.models import GpuHost


class Run(models.Model):
    """One (arm, workload, load level, repetition) on one host; the record of its state.

    The broker only rings the doorbell: the state here is what counts, claims are conditional
    updates on it, and a lease (renewed by the agent's heartbeats) says how long a claim holds.
    """

    class Status(models.TextChoices):
        PLANNED = "planned"
        QUEUED = "queued"
        CLAIMED = "claimed"
        RUNNING = "running"
        DONE = "done"
        INCOMPLETE = "incomplete"
        FAILED = "failed"
        CANCELLED = "cancelled"

    experiment = models.ForeignKey(
        "experiments.Experiment", on_delete=models.CASCADE, related_name="runs"
    )
    arm = models.ForeignKey("experiments.Arm", on_delete=models.PROTECT, related_name="runs")
    # Null only for a run imported from another tool's file (no SpecPortal host measured it).
    # Typed as never None: every code path that reads it (dispatch, claims, the agents' API)
    # handles measured runs only, and dispatch refuses a run without a host (``_host_name``).
    host: models.ForeignKey[GpuHost | None, GpuHost] = models.ForeignKey(  # type: ignore[misc]
        "hosts.GpuHost", on_delete=models.PROTECT, related_name="runs", null=True, blank=True
    )
    sequence = models.PositiveIntegerField()  # execution order within the experiment, from 1
    workload = models.CharField(max_length=100)
    load = models.CharField(max_length=100)
    repetition = models.PositiveIntegerField()  # from 1; 0 for a calibrate_draft_cost run
    position = models.PositiveIntegerField()  # place of the arm in its rotation block, from 1
    estimated_seconds = models.FloatField()
    # A calibrate_draft_cost run (experiments.services): the arm's draft model served alone as
    # the target, same workload and concurrency, to measure the draft's cost c. The agent serves
    # this configuration instead of the arm's; the verdict reads it as the arm's draft cost, never
    # as one of its repetitions.
    draft_alone_configuration = models.ForeignKey(
        "configurations.FrozenConfiguration",
        on_delete=models.PROTECT,
        related_name="draft_alone_runs",
        null=True,
        blank=True,
    )

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PLANNED)
    attempt = models.PositiveIntegerField(default=0)  # 0 until first queued
    cancel_requested = models.BooleanField(default=False)
    queued_at = models.DateTimeField(null=True, blank=True)  # last time the doorbell was rung
    claimed_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    progress = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)

    # What the engine said about itself (endpoint bodies, parsed start-up log lines), every check
    # of it against the frozen configuration (specportal.engines.selfcheck), and the disagreements:
    # the parts of the protocol's EngineReport (report, checks, mismatches), as the agent sent them.
    engine_report = models.JSONField(default=dict, blank=True)
    engine_checked = models.JSONField(default=list, blank=True)
    mismatches = models.JSONField(default=list, blank=True)
    # Environment the agent added for this run (e.g. VLLM_SERVER_DEV_MODE=1 for cache reset): part
    # of the run's record, never of the configuration.
    engine_env = models.JSONField(default=dict, blank=True)
    command = models.JSONField(default=list, blank=True)
    log_excerpt = models.TextField(blank=True)
    summary = models.JSONField(null=True, blank=True)
    server = models.JSONField(default=dict, blank=True)  # raw and parsed /metrics scrapes
    acceptance = models.JSONField(default=dict, blank=True)  # speculative counters, per engine
    # The load generator's prefix-cache figure (specportal.loadgen.prefixcache): a fraction, or
    # null when the engine did not say; ``prefix_cache`` keeps its source, tokens and reason.
    prefix_cache_hit_fraction = models.FloatField(null=True, blank=True)
    prefix_cache = models.JSONField(default=dict, blank=True)
    result_attempt = models.PositiveIntegerField(null=True, blank=True)
    result_schema = models.PositiveIntegerField(null=True, blank=True)
    requests_total = models.PositiveIntegerField(null=True, blank=True)
    requests_failed = models.PositiveIntegerField(null=True, blank=True)
    # An imported run (import-mode experiments): the file's format (empty: measured by
    # SpecPortal), the producing tool and version where the file says, the file's SHA-256 and the
    # run's place in it (an identical upload is idempotent), and which figures came from the file
    # and which were derived (``RunFile.describe()``).
    source_format = models.CharField(max_length=32, blank=True)
    source_tool = models.CharField(max_length=64, blank=True)
    source_tool_version = models.CharField(max_length=64, blank=True)
    source_sha256 = models.CharField(max_length=64, blank=True)
    source_index = models.PositiveIntegerField(null=True, blank=True)
    source = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ("experiment", "sequence")
        constraints = (
            models.UniqueConstraint(fields=["experiment", "sequence"], name="run_sequence_unique"),
            models.UniqueConstraint(
                fields=["experiment", "arm", "workload", "load", "repetition"],
                name="run_cell_arm_repetition_unique",
            ),
        )
        indexes = (
            models.Index(fields=["status", "queued_at"], name="run_status_queued"),
            models.Index(fields=["status", "lease_expires_at"], name="run_status_lease"),
            models.Index(fields=["host", "status"], name="run_host_status"),
        )

    def __str__(self) -> str:
        return f"run {self.pk} ({self.cell} rep {self.repetition}, {self.status})"

    @property
    def cell(self) -> str:
        return f"{self.workload}/{self.load}"

    @property
    def imported(self) -> bool:
        return bool(self.source_format) and self.source_format != "specportal"

    @property
    def imported_label(self) -> str:
        """What pages and verdicts say of an imported run ("" for a measured one)."""
        if not self.source_format:
            return ""
        return str(self.source.get("label") or f"imported from {self.source_tool}")


# The measured columns of a RequestRecord, in the order ingestion writes them and downloads
# read them.
REQUEST_RECORD_FIELDS: Final = (
    "index",
    "scheduled",
    "sent",
    "chunk_times",
    "chunk_tokens",
    "prompt_tokens",
    "output_tokens",
    "success",
    "finish_reason",
    "error",
    "text_hash",
    "category",
)


class RequestRecord(models.Model):
    """One request of a run, kept whole: chunk arrival times and token counts as arrays.

    Times are seconds on the load generator's monotonic clock (only differences mean anything).
    """

    # No index of its own: the unique (run, index) serves every lookup by run, and one index
    # fewer to maintain is a good part of the COPY of 100,000 rows.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="requests", db_index=False)
    index = models.PositiveIntegerField()
    scheduled = models.FloatField(null=True)
    sent = models.FloatField(null=True)
    chunk_times = FloatArrayField()
    chunk_tokens = IntegerArrayField(null=True)
    prompt_tokens = models.IntegerField(null=True)
    output_tokens = models.IntegerField(null=True)
    success = models.BooleanField()
    finish_reason = models.CharField(max_length=32, blank=True)
    error = models.TextField(blank=True)
    text_hash = models.CharField(max_length=64, blank=True)
    category = models.CharField(max_length=32, blank=True)

    class Meta:
        ordering = ("run", "index")
        constraints = (
            models.UniqueConstraint(fields=["run", "index"], name="request_record_index_unique"),
        )

    def __str__(self) -> str:
        return f"request {self.index} of run {self.run_id}"


class ResultUpload(models.Model):
    """An agent's result file as received (gzip'd JSON), one per run and attempt.

    The upload is checked whole, then answered; a portal worker ingests it. Its body is kept in
    ``ResultUploadPart`` pieces (written and read a piece at a time), which lets a failed
    ingestion be retried; the unique (run, attempt) makes a repeated PUT harmless.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="uploads")
    attempt = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField(default=0)  # bytes of the body as received
    received_at = models.DateTimeField(auto_now_add=True)
    ingested_at = models.DateTimeField(null=True, blank=True)
    ingest_error = models.TextField(blank=True)
    # Set when the upload was refused on receipt (``runs.ingest.upload_problem``): the 400's
    # message and fields, answered again to a repeated PUT. A refused upload is never ingested.
    refusal = models.JSONField(null=True, blank=True)
    # When it was checked whole on receipt (``runs.uploads.upload_problem``): the worker then
    # does not check its records again. Null for uploads stored before receipts were checked.
    checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = (
            models.UniqueConstraint(fields=["run", "attempt"], name="result_upload_once"),
        )

    def __str__(self) -> str:
        return f"upload of run {self.run_id} attempt {self.attempt}"


class ResultUploadPart(models.Model):
    """One piece of an upload's body, in order (``number`` from 0): the web process streams an
    upload into pieces and never holds it whole; the worker reads them back in order. Never
    rewritten, and fixed once its upload is ingested (database triggers, ``runs/0009``)."""

    upload = models.ForeignKey(
        ResultUpload, on_delete=models.CASCADE, related_name="parts", db_index=False
    )
    number = models.PositiveIntegerField()
    data = models.BinaryField()

    class Meta:
        constraints = (
            models.UniqueConstraint(fields=["upload", "number"], name="result_upload_part_once"),
        )

    def __str__(self) -> str:
        return f"part {self.number} of upload {self.upload_id}"


class RunFigures(models.Model):
    """What a finished run keeps for figures, computed once when it lands (``runs.figures``):
    its downsampled ECDF per metric and its tokens-per-chunk counts. Comparisons of any runs
    draw from here and never read a request again; a re-run's new attempt replaces it."""

    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, primary_key=True, related_name="figures"
    )
    result_attempt = models.PositiveIntegerField()
    data = models.JSONField()
    computed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"figures of run {self.run_id} (attempt {self.result_attempt})"
