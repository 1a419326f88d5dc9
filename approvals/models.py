"""Deployments and the change requests that move them from one frozen configuration to another.

A :class:`Deployment` is a named serving target (``chat-prod``) with its current configuration,
the workloads and load levels that represent it (normalised documents: evidence is matched by
content, not by name), the objectives it requires (by hash), and its history
(:class:`DeploymentPeriod`: every configuration it ran with, from when to when, approved by whom
on what evidence).

A :class:`ChangeRequest` moves a deployment from A to B. Its state machine (django-fsm-2:
protected field, transitions declared on the model, a conditional UPDATE on the state) is driven
only by :mod:`approvals.services`, which also takes a row lock, checks roles, four eyes and the
evidence rules, and audits every step::

    draft ─open─▶ open ─approve─▶ approved ─apply─▶ applied
      │            │  ╲─reject──▶ rejected      ╲─expire─▶ expired
      └─withdraw───┴─withdraw──▶ withdrawn       ╲─reopen─▶ open (a superseding verdict fails)
"""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django_fsm import ConcurrentTransitionMixin, FSMField, transition


class Deployment(models.Model):
    name = models.SlugField(max_length=100, unique=True)
    owner_team = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    configuration = models.ForeignKey(
        "configurations.FrozenConfiguration", on_delete=models.PROTECT, related_name="+"
    )
    # Ordered lists of normalised documents (specportal.protocol Workload / LoadLevel, to_dict):
    # evidence cells are matched to them by content (approvals.content), never by name.
    workloads = models.JSONField()
    loads = models.JSONField()
    objectives = models.JSONField()
    objectives_hash = models.CharField(max_length=64)
    # A demo deployment accepts evidence measured on emulated hosts (and says so everywhere).
    is_demo = models.BooleanField(default=False)
    # Small teams: the people involved in a change may approve it, for this recorded reason.
    self_approval_reason = models.TextField(blank=True)
    # An approved change not applied within this many days expires.
    approval_valid_days = models.PositiveIntegerField(default=14)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name

    @property
    def allows_self_approval(self) -> bool:
        return bool(self.self_approval_reason.strip())


class AcceptedObjectives(models.Model):
    """An objectives document the deployment's owner accepted as stricter than the required one.

    Evidence judged by it counts, unless the person who accepted it is the change's author (the
    author never writes the rules their own evidence is judged by).
    """

    deployment = models.ForeignKey(
        Deployment, on_delete=models.CASCADE, related_name="accepted_objectives"
    )
    objectives = models.JSONField()
    objectives_hash = models.CharField(max_length=64)
    reason = models.TextField()
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    accepted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("deployment", "accepted_at")
        constraints = (
            models.UniqueConstraint(
                fields=["deployment", "objectives_hash"], name="accepted_objectives_unique"
            ),
        )

    def __str__(self) -> str:
        return f"{self.deployment}: {self.objectives_hash[:12]}"


class DeploymentPeriod(models.Model):
    """The deployment ran ``configuration`` from ``started_at`` until ``ended_at`` (open: now)."""

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="periods")
    configuration = models.ForeignKey(
        "configurations.FrozenConfiguration", on_delete=models.PROTECT, related_name="+"
    )
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    # Null for the configuration the deployment was registered with.
    change_request = models.OneToOneField(
        "ChangeRequest", on_delete=models.PROTECT, null=True, blank=True, related_name="period"
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    applied_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    against_evidence = models.BooleanField(default=False)
    # The evidence as it was judged at approval: experiments, verdict ids, the rules' lines.
    evidence = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ("deployment", "-started_at", "-id")
        constraints = (
            models.UniqueConstraint(
                fields=["deployment"],
                condition=models.Q(ended_at__isnull=True),
                name="deployment_one_current_period",
            ),
        )

    def __str__(self) -> str:
        return f"{self.deployment} {self.configuration_id} from {self.started_at:%Y-%m-%d}"


class ChangeRequest(ConcurrentTransitionMixin, models.Model):
    class State(models.TextChoices):
        DRAFT = "draft"
        OPEN = "open"
        APPROVED = "approved"
        REJECTED = "rejected"
        WITHDRAWN = "withdrawn"
        APPLIED = "applied"
        EXPIRED = "expired"

    deployment = models.ForeignKey(
        Deployment, on_delete=models.PROTECT, related_name="change_requests"
    )
    from_configuration = models.ForeignKey(
        "configurations.FrozenConfiguration", on_delete=models.PROTECT, related_name="+"
    )
    to_configuration = models.ForeignKey(
        "configurations.FrozenConfiguration", on_delete=models.PROTECT, related_name="+"
    )
    reason = models.TextField()
    evidence = models.ManyToManyField("experiments.Experiment", related_name="change_requests")
    # protected: only the transitions below change it, and each save is conditional on the state
    # it was read in (ConcurrentTransitionMixin), so two decisions cannot both win.
    state = FSMField(default=State.DRAFT, choices=State.choices, protected=True, db_index=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    # The approver's written justification (required against the evidence) or the rejection's
    # reason.
    decision_note = models.TextField(blank=True)
    against_evidence = models.BooleanField(default=False)
    # Set when four eyes were waived under the deployment's self-approval reason (copied here).
    self_approval_reason = models.TextField(blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    applied_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    applied_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_reason = models.TextField(blank=True)

    objects: ClassVar[models.Manager[ChangeRequest]] = models.Manager()

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"change request #{self.pk} on {self.deployment}"

    # --- transitions: state only; rules, roles and bookkeeping live in approvals.services ----
    @transition(field=state, source=State.DRAFT, target=State.OPEN)
    def open(self) -> None:
        pass

    @transition(field=state, source=[State.DRAFT, State.OPEN], target=State.WITHDRAWN)
    def withdraw(self) -> None:
        pass

    @transition(field=state, source=State.OPEN, target=State.APPROVED)
    def approve(self) -> None:
        pass

    @transition(field=state, source=State.OPEN, target=State.REJECTED)
    def reject(self) -> None:
        pass

    @transition(field=state, source=State.APPROVED, target=State.APPLIED)
    def apply(self) -> None:
        pass

    @transition(field=state, source=State.APPROVED, target=State.EXPIRED)
    def expire(self) -> None:
        pass

    @transition(field=state, source=State.APPROVED, target=State.OPEN)
    def reopen(self) -> None:
        pass

    @property
    def is_closed(self) -> bool:
        return self.state in (
            self.State.REJECTED,
            self.State.WITHDRAWN,
            self.State.APPLIED,
            self.State.EXPIRED,
        )


class EvidenceCheck(models.Model):
    """The evidence rules as evaluated at one moment (opening, approval, apply, a new verdict)."""

    class Stage(models.TextChoices):
        OPEN = "open"
        APPROVAL = "approval"
        APPLY = "apply"
        RECHECK = "recheck"

    change_request = models.ForeignKey(
        ChangeRequest, on_delete=models.CASCADE, related_name="checks"
    )
    stage = models.CharField(max_length=16, choices=Stage.choices)
    evaluated_at = models.DateTimeField(auto_now_add=True)
    passed = models.BooleanField()
    # [{"rule", "passed", "message", ...}] and {experiment id: verdict id}
    rules = models.JSONField()
    verdict_ids = models.JSONField(default=dict)

    class Meta:
        ordering = ("change_request", "-evaluated_at", "-id")

    def __str__(self) -> str:
        return f"{self.change_request}: {'pass' if self.passed else 'fail'} ({self.stage})"


class ChangeRequestComment(models.Model):
    change_request = models.ForeignKey(
        ChangeRequest, on_delete=models.CASCADE, related_name="comments"
    )
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("change_request", "created_at", "id")

    def __str__(self) -> str:
        return f"comment by {self.author_id} on {self.change_request_id}"
