"""The live scheduler's own state: settings, policy memory, the round's lease, job reports, the demo feed."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from .. import bounds
from ..core.config import DEFAULT_RESTART_SECONDS
from .audit import SchedulingRound
from .queue import Job


class JobReport(models.Model):
    """What a running job's workers said about themselves: progress, speed and gradient noise."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="reports")
    at = models.DateTimeField()
    progress = models.FloatField(validators=[MinValueValidator(0.0), MaxValueValidator(bounds.MAX_TOTAL_WORK)])
    throughput = models.FloatField(
        validators=[MinValueValidator(0.0), MaxValueValidator(bounds.MAX_THROUGHPUT)], help_text="samples/s"
    )
    batch_size = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(bounds.MAX_BATCH_SIZE)]
    )
    gpus = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(bounds.MAX_GPUS)],
        help_text="GPUs it ran on when it measured",
    )
    nodes = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(bounds.MAX_GPUS)]
    )
    grad_noise_scale = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0), MaxValueValidator(bounds.MAX_GRAD_NOISE_SCALE)]
    )

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["job", "at"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(progress__gte=0) & Q(throughput__gte=0), name="jobreport_non_negative"
            ),
            models.CheckConstraint(
                condition=Q(progress__lte=bounds.MAX_TOTAL_WORK) & Q(throughput__lte=bounds.MAX_THROUGHPUT),
                name="jobreport_bounded",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job} at {self.at:%Y-%m-%d %H:%M:%S}"


class ExecutorKind:
    """The names of the built-in cluster back-ends. The settings accept any registered back-end
    (``scheduler.backends.register_backend``), so a new one needs no migration."""

    SIMULATED = "simulated"
    LOCAL = "local"
    SLURM = "slurm"
    SLURM_OBSERVER = "slurm-observer"
    KUBERNETES = "kubernetes"
    KUBERNETES_OBSERVER = "kubernetes-observer"


class SchedulerSettings(models.Model):
    """The live scheduler's knobs: one row, changed at run time; every change is recorded."""

    policy = models.CharField(max_length=50, default="tiresias")
    round_seconds = models.PositiveIntegerField(
        default=60, validators=[MinValueValidator(1), MaxValueValidator(bounds.MAX_ROUND_SECONDS)])
    # A registered back-end's name (checked by the settings service against the registry, not by choices here).
    executor = models.CharField(max_length=20, default=ExecutorKind.SIMULATED,
                                help_text="the cluster back-end that runs the round's decisions")
    simulated_speedup = models.FloatField(
        default=1.0, validators=[MinValueValidator(bounds.SIMULATED_SPEEDUP_RANGE[0]),
                                 MaxValueValidator(bounds.SIMULATED_SPEEDUP_RANGE[1])],
        help_text="the simulated executor's clock runs this many times faster than the wall",
    )
    policy_config = models.JSONField(
        default=dict, blank=True,
        help_text="the policy's own settings, e.g. {\"p\": -1} for pollux; checked against the policy on save",
    )
    restart_seconds = models.FloatField(
        default=DEFAULT_RESTART_SECONDS,
        validators=[MinValueValidator(0.0), MaxValueValidator(bounds.MAX_RESTART_SECONDS)],
        help_text="how long a job stalls after a rescale or preemption: charged by the simulated executor, "
                  "priced by the policies that price restarts",
    )
    paused = models.BooleanField(default=False, help_text="tick to stop scheduling rounds")
    # The editable fields as last validated and saved: what rounds, forecasts and beat fall back to should a stored
    # value ever fail its rule (``live.config.live_settings``).
    last_valid = models.JSONField(default=dict, blank=True, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = verbose_name_plural = "scheduler settings"
        constraints = [
            models.CheckConstraint(condition=Q(pk=1), name="scheduler_settings_single_row"),
            models.CheckConstraint(condition=Q(round_seconds__gte=1), name="scheduler_round_seconds_positive"),
            models.CheckConstraint(condition=Q(simulated_speedup__gt=0), name="scheduler_speedup_positive"),
            models.CheckConstraint(condition=Q(restart_seconds__gte=0), name="scheduler_restart_non_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.policy} every {self.round_seconds} s on the {self.executor} executor"


class SettingsChange(models.Model):
    """Audit trail of the scheduler settings: who changed what, when."""

    at = models.DateTimeField()
    field = models.CharField(max_length=50)
    old_value = models.CharField(max_length=100)
    new_value = models.CharField(max_length=100)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.field}: {self.old_value} → {self.new_value}"


class PolicyState(models.Model):
    """The memory a policy carries from one round to the next (``scheduler.core`` ``PolicyState``), kept per
    policy so that switching back finds it; the round's own memory is ``RoundMemory``."""

    policy = models.CharField(max_length=50, unique=True)
    state = models.JSONField(default=dict)
    round = models.ForeignKey(SchedulingRound, on_delete=models.SET_NULL, null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["policy"]

    def __str__(self) -> str:
        return self.policy


class RoundMemory(models.Model):
    """The round's own memory, whatever the policy: each job's rescales of the last hour (the cycle's
    ``max_rescales_per_hour`` and settling guards, ``guards.RescaleHistory``), so that switching policy does not
    reset it. One row."""

    rescales = models.JSONField(default=dict, help_text="job → times it changed for its own sake in the last hour")
    yielded = models.JSONField(default=dict, blank=True,
                               help_text="job → when it last gave GPUs up for other jobs, within the last hour")
    restarts = models.JSONField(default=list, blank=True,
                                help_text="restart delays measured on a real cluster (s), newest last")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = verbose_name_plural = "round memory"
        constraints = [models.CheckConstraint(condition=Q(pk=1), name="round_memory_single_row")]

    def __str__(self) -> str:
        return f"rescales of {len(self.rescales)} jobs"


class Lease(models.Model):
    """A named lock with an expiry, held by at most one worker (the scheduling round's)."""

    name = models.CharField(max_length=50, unique=True)
    holder = models.CharField(max_length=255, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} held by {self.holder or 'nobody'}"


class DemoFeed(models.Model):
    """The demo cluster's arrivals: a trace replayed in a loop, ``speedup`` times faster than the wall."""

    trace = models.CharField(max_length=500, help_text="the trace file, or 'generator'")
    started_at = models.DateTimeField(help_text="wall time of the trace's time zero")
    speedup = models.FloatField(default=1.0, validators=[MinValueValidator(0.001)])
    submitted = models.PositiveIntegerField(default=0, help_text="trace jobs submitted so far, over all loops")

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(speedup__gt=0), name="demofeed_speedup_positive")]

    def __str__(self) -> str:
        return f"{self.trace} ×{self.speedup:g}, {self.submitted} submitted"


class ClusterFairness(models.Model):
    """The cluster manager's own fairness as last read by an observer round: Slurm's ``sshare`` tree and
    ``sprio``'s factors of the waiting jobs (``scheduler.backends.slurm.fairness.SlurmFairness.as_json``). One row,
    replaced each round."""

    read_at = models.DateTimeField()
    data = models.JSONField(default=dict)

    class Meta:
        verbose_name_plural = "cluster fairness"

    def __str__(self) -> str:
        return f"cluster fairness read at {self.read_at:%Y-%m-%d %H:%M:%S}"
