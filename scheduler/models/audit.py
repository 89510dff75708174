"""The audit trail of scheduling: rounds and every change to a job's GPUs, with its reason."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from .queue import Job


class RoundStatus(models.TextChoices):
    RUNNING = "running", "running"
    OK = "ok", "ok"
    FAILED = "failed", "failed"
    SKIPPED = "skipped", "skipped"  # the cluster could not be read: nothing decided or written


class RoundQuerySet(models.QuerySet["SchedulingRound"]):
    def rounds_only(self) -> RoundQuerySet:
        """Rounds, without the starts made between them: what a round's cadence (its phase, the last one, two
        rounds running) is read from; a stream of submissions must not stand in for rounds that stopped."""
        return self.filter(between_rounds=False)


class SchedulingRound(models.Model):
    """One scheduling round: the policy that ran, its timings and what it decided; or, ``between_rounds``, the starts
    made on idle GPUs when a job arrived or a cancel freed GPUs (``scheduler.core.admission``), which change no
    running job."""

    policy = models.CharField(max_length=50)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=RoundStatus.choices, default=RoundStatus.RUNNING)
    jobs_considered = models.PositiveIntegerField(default=0)
    decisions = models.PositiveIntegerField(default=0, help_text="starts, rescales and preemptions")
    starts = models.PositiveIntegerField(default=0)
    rescales = models.PositiveIntegerField(default=0)
    preemptions = models.PositiveIntegerField(default=0)
    finished = models.PositiveIntegerField(default=0, help_text="jobs the executor saw finish before the round")
    skipped = models.PositiveIntegerField(default=0, help_text="decisions dropped: the job changed meanwhile")
    executor = models.CharField(max_length=20, blank=True)
    snapshot_ms = models.FloatField(null=True, blank=True)
    policy_ms = models.FloatField(null=True, blank=True)
    write_ms = models.FloatField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True, help_text="snapshot, policy and write")
    launch_ms = models.FloatField(null=True, blank=True,
                                  help_text="carrying the decisions out (on Slurm: submits, requeues, resizes)")
    error = models.TextField(blank=True)
    note = models.CharField(max_length=2000, blank=True, help_text="the policy's word on the round as a whole, "
                            "e.g. a solver without an answer (running jobs then keep their GPUs), and the cluster's")
    between_rounds = models.BooleanField(
        default=False,
        help_text="starts of waiting jobs on idle GPUs between two rounds, every running job kept as it was")

    objects = RoundQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=RoundStatus.values), name="round_status_valid"),
        ]

    def __str__(self) -> str:
        return f"round {self.pk} ({self.policy}, {self.status})"


class RescaleKind(models.TextChoices):
    START = "start", "start"
    RESCALE = "rescale", "rescale"
    PREEMPT = "preempt", "preempt"
    FINISH = "finish", "finish"
    CANCEL = "cancel", "cancel"
    REQUEUE = "requeue", "requeue"
    SETTINGS = "settings", "settings changed"


class RescaleEvent(models.Model):
    """Audit trail: every change to a job's GPUs or queue position, and why."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="rescale_events")
    round = models.ForeignKey(
        SchedulingRound, on_delete=models.SET_NULL, null=True, blank=True, related_name="events"
    )
    at = models.DateTimeField()
    kind = models.CharField(max_length=10, choices=RescaleKind.choices)
    from_gpus = models.PositiveIntegerField(default=0)
    to_gpus = models.PositiveIntegerField(default=0)
    # The GPU type held before and after (blank where none was held, and in rows older than types here).
    from_type = models.CharField(max_length=32, blank=True, default="", db_default="")
    to_type = models.CharField(max_length=32, blank=True, default="", db_default="")
    reason = models.TextField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
        help_text="the operator; empty when the scheduler decided",
    )

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.job}: {self.gpus_label}"

    @property
    def gpus_label(self) -> str:
        """What changed, in GPUs: "4 → 8", or "4 v100 → 4 a100" for a move between types."""
        if self.from_type and self.to_type and self.from_type != self.to_type:
            return f"{self.from_gpus} {self.from_type} → {self.to_gpus} {self.to_type}"
        return f"{self.from_gpus} → {self.to_gpus}"
